import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parse } from 'yaml';
import type { ControlPlane } from '../../src/api/control-plane.ts';
import { CliEnv, statusOf } from '../support/cli.ts';

/** A Cluster API user's KubeadmControlPlane through the CLI: convert, simulate -f and up -f. */

const env = new CliEnv('127.212');
after(() => {
  env.cleanup();
});

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'kcp');
const V1BETA1 = join(FIXTURES, 'quick-start-v1beta1.yaml');
const V1BETA2 = join(FIXTURES, 'scale-in-v1beta2.yaml');

describe('fastplane convert', () => {
  test('prints the ControlPlane on stdout, the etcd mapping and every ignored field on stderr', async () => {
    const run = await env.run(['convert', '-f', V1BETA1]);
    assert.equal(run.code, 0, run.stderr);
    const cp = parse(run.stdout) as ControlPlane;
    assert.equal(cp.kind, 'ControlPlane');
    assert.equal(cp.metadata.name, 'capi-quickstart-control-plane');
    assert.equal(cp.spec.replicas, 3);
    assert.match(run.stderr, /Kubernetes v1\.30\.4 -> 3\.5\.24 .* -> using /);
    assert.match(run.stderr, /^warning: spec\.machineTemplate: ignored: /m);
    assert.match(run.stderr, /^warning: spec\.kubeadmConfigSpec\.initConfiguration: ignored: /m);
  });

  test('-o json prints the same manifest as JSON', async () => {
    const yaml = parse((await env.run(['convert', '-f', V1BETA2])).stdout) as ControlPlane;
    const run = await env.run(['convert', '-f', V1BETA2, '-o', 'json']);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), yaml);
    assert.equal(yaml.spec.rollout.maxSurge, 0);
  });

  test('an invalid KubeadmControlPlane exits 2 naming the field path in it, without a stack trace', async () => {
    const path = join(env.stateDir, 'even.yaml');
    writeFileSync(path, readFileSync(V1BETA1, 'utf8').replace('replicas: 3', 'replicas: 4'));
    for (const command of [['convert', '-f', path], ['up', '-f', path], ['simulate', '-f', path]]) {
      const run = await env.run(command);
      assert.equal(run.code, 2, `${command[0]!}: ${run.stderr}`);
      assert.match(run.stderr, /^error: spec\.replicas: must be odd with stacked etcd/m);
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  test('-o must be yaml or json', async () => {
    const run = await env.run(['convert', '-f', V1BETA1, '-o', 'table']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /-o: must be yaml or json/);
  });
});

describe('fastplane simulate -f', () => {
  test('prints KCP order against fastplane order for bring-up, rollout and remediation', async () => {
    const run = await env.run(['simulate', '-f', V1BETA1, '--provisioning', '8m-12m', '--runs', '5']);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trim().split('\n');
    assert.match(lines[0]!, /^KubeadmControlPlane capi-quickstart-control-plane: 3 members, etcd \S+, provisioning 8m-12m, 5 runs per order/);
    for (const scenario of [/^bring-up 0 -> 3 +KCP, one at a time/, /^rollout \S+ -> \S+, maxSurge 1 +KCP/, /^remediation of 1 failed voter +KCP/]) {
      const at = lines.findIndex((line) => scenario.test(line));
      assert.ok(at > 0, `a row for ${String(scenario)}\n${run.stdout}`);
      assert.match(lines[at + 1]!, /^\s+fastplane, parallel\s+\S+\s+\S+\s+\S+\s+5\/5\s+\d+\.\d\dx$/);
    }
  });

  test('-o json carries the percentiles of each scenario and order', async () => {
    const run = await env.run(['simulate', '-f', V1BETA2, '--provisioning', '8m-12m', '--runs', '3', '-o', 'json']);
    assert.equal(run.code, 0, run.stderr);
    const doc = JSON.parse(run.stdout) as { source: string; scenarios: { scenario: string; serial: { p50: number; converged: number }; parallel: { p50: number }; speedup: number }[] };
    assert.equal(doc.source, 'KubeadmControlPlane');
    const bringUp = doc.scenarios.find((s) => s.scenario === 'bring-up')!;
    assert.equal(bringUp.serial.converged, 3);
    assert.ok(bringUp.parallel.p50 * 2 < bringUp.serial.p50, '5 machines in parallel take well under half the serial time');
  });
});

describe('fastplane up -f with a KubeadmControlPlane', () => {
  test('brings up the etcd part of the control plane on the nearest installed etcd', async () => {
    const run = await env.run(['up', '-f', V1BETA1, '--replicas', '1', '-o', 'json', '--timeout', '2m']);
    assert.equal(run.code, 0, run.stderr);
    const doc = statusOf(run.stdout);
    assert.equal(doc.name, 'capi-quickstart-control-plane');
    assert.equal(doc.status.voters, 1);
    const using = /Kubernetes v1\.30\.4 -> 3\.5\.24 .* -> using (\S+)/.exec(run.stderr);
    assert.ok(using, run.stderr);
    assert.equal(doc.spec.version, using[1], 'the members run the etcd the mapping named');
    assert.equal((await env.run(['down', 'capi-quickstart-control-plane'])).code, 0);
  });
});
