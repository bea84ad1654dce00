import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { validateControlPlane } from '../../src/api/control-plane.ts';
import { InvalidInputError } from '../../src/api/errors.ts';
import { validateVersionChange } from '../../src/api/version-change.ts';
import { resolveManifest } from '../../src/cli/spec-flags.ts';
import { CliContext } from '../../src/cli/context.ts';

/** The refusal message; fails when the change is allowed. */
function refusal(from: string, to: string, running?: string[]): string {
  const message = validateVersionChange(from, to, running);
  assert.ok(message !== undefined, `${from} -> ${to} was allowed`);
  assert.ok(message.startsWith('spec.version: '), message);
  return message;
}

describe('version changes (spec.version against the stored spec)', () => {
  test('allows a patch change in either direction, the next minor, and no change', () => {
    for (const [from, to] of [
      ['3.4.23', '3.4.23'],
      ['3.4.23', '3.4.27'],
      ['3.4.23', '3.4.1'],
      ['3.5.16', '3.5.0'],
      ['3.4.23', '3.5.16'],
      ['3.5.16', '3.6.0'],
      // Down one minor by etcd's downgrade protocol, which exists from 3.6 on.
      ['3.6.17', '3.5.36'],
      ['3.7.4', '3.6.17'],
    ] as const) {
      assert.equal(validateVersionChange(from, to), undefined, `${from} -> ${to}`);
    }
  });

  test('refuses an older minor etcd has no downgrade protocol for, naming spec.version and the rule', () => {
    for (const [from, to] of [
      ['3.5.16', '3.4.23'],
      ['3.6.0', '3.4.23'],
      ['3.7.4', '3.4.23'],
    ] as const) {
      const message = refusal(from, to);
      assert.match(message, /older minor/);
      assert.ok(message.includes(`${from} -> ${to}`), message);
    }
  });

  test('refuses a downgrade that skips a minor, naming the path etcd supports', () => {
    const message = refusal('3.7.4', '3.5.36');
    assert.equal(message, "spec.version: cannot skip a minor version going down (3.7.4 -> 3.5.36); etcd's downgrade path is 3.7.4 -> 3.6.17 -> 3.5.36, one downgrade per minor: downgrade to 3.6 first");
  });

  test('refuses skipping a minor and says which one comes first', () => {
    const message = refusal('3.4.23', '3.6.0');
    assert.match(message, /skip a minor/);
    assert.match(message, /upgrade to 3\.5 first/);
    assert.match(refusal('3.4.23', '3.7.1'), /upgrade to 3\.5 first/);
  });

  test('refuses a major change', () => {
    assert.match(refusal('3.5.16', '4.0.0'), /^spec\.version: cannot change the major version/);
  });

  test('a rollout in progress: the new version may not skip past a machine that still runs an older minor', () => {
    // Stored 3.5.16 (rolling out from 3.4.23): 3.6 is one minor above the spec but two above 3.4 machines.
    const message = refusal('3.5.16', '3.6.0', ['3.4.23', '3.5.16']);
    assert.ok(message.startsWith('spec.version: a machine still runs 3.4.23'), message);
    assert.match(message, /skip a minor/);
    // The rule itself is against the stored spec: back to 3.4 is a downgrade even with 3.4 machines left.
    assert.match(refusal('3.5.16', '3.4.23', ['3.4.23', '3.5.16']), /^spec\.version: cannot go down to an older minor/);
    assert.equal(validateVersionChange('3.5.16', '3.5.17', ['3.4.23', '3.5.16']), undefined);
  });
});

describe('the CLI refuses a version change against the stored spec (exit 2)', () => {
  test('rollout 3.5.16 -> 3.4.23 and 3.4.23 -> 3.6.0 are invalid input naming spec.version; nothing is stored', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fastplane-version-'));
    try {
      const ctx = new CliContext(dir, 'silent');
      for (const [stored, wanted, rule] of [
        ['3.5.16', '3.4.23', /older minor/],
        ['3.4.23', '3.6.0', /skip a minor/],
      ] as const) {
        const name = `v${stored.replaceAll('.', '')}`;
        await ctx.store.applySpec(validateControlPlane({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name }, spec: { version: stored } }), 1);
        // rejects() covers a resolveManifest that throws as well as one that returns a rejected promise.
        await assert.rejects(
          () => Promise.resolve().then(() => resolveManifest(ctx, { name, version: wanted })),
          (error: unknown) => error instanceof InvalidInputError && error.problems.some((p) => p.startsWith('spec.version: ') && rule.test(p)),
        );
        assert.equal((await ctx.store.getControlPlane(name))?.manifest.spec.version, stored);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
