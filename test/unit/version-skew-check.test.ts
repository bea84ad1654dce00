import assert from 'node:assert/strict';
import { test } from 'node:test';
import { skewBreaches, type VersionSample } from '../support/component-versions.ts';

// The rollout e2e judges its samples with skewBreaches: it must name what the skew policy forbids.
const sample = (apiservers: string[], controllerManagers: string[], schedulers: string[]): VersionSample => {
  const byAddress = (versions: string[]): Map<string, string> => new Map(versions.map((v, i) => [`127.0.0.${String(i + 1)}`, v]));
  return { at: 0, apiservers: byAddress(apiservers), controllerManagers: byAddress(controllerManagers), schedulers: byAddress(schedulers) };
};

test('a rollout mid-way within the policy has no breach', () => {
  assert.deepEqual(skewBreaches(sample(['1.36.3', '1.37.2', '1.36.3'], ['1.36.3', '1.36.3'], ['1.36.3'])), []);
  assert.deepEqual(skewBreaches(sample(['1.37.2'], ['1.37.2'], ['1.37.2'])), []);
});

test('a controller-manager or scheduler newer than the oldest apiserver is a breach', () => {
  assert.equal(skewBreaches(sample(['1.36.3', '1.37.2'], ['1.37.2'], [])).length, 1);
  assert.equal(skewBreaches(sample(['1.36.3', '1.37.2'], [], ['1.37.2'])).length, 1);
});

test('apiservers two minors apart are a breach', () => {
  assert.match(skewBreaches(sample(['1.35.4', '1.37.2'], [], [])).join(), /apiservers at 1\.35\.4 and 1\.37\.2/);
});
