import assert from 'node:assert/strict';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CliEnv, pidsUnder } from '../support/cli.ts';

const env = new CliEnv('127.67');
after(() => {
  env.cleanup();
});

const GOOD = { apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 'bad' }, spec: { replicas: 3 } };

function manifest(name: string, content: unknown): string {
  const path = join(env.stateDir, `${name}.yaml`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

function withSpec(spec: Record<string, unknown>): unknown {
  return { ...GOOD, spec: { ...GOOD.spec, ...spec } };
}

/** Nothing created: no machine folder, no member process, no control plane record. */
function assertNothingCreated(): void {
  const clusters = join(env.stateDir, 'clusters');
  assert.deepEqual(existsSync(clusters) ? readdirSync(clusters) : [], [], 'no machine was created');
  assert.deepEqual(pidsUnder(env.stateDir), [], 'no process was started');
  assert.deepEqual(env.controlPlanes(), [], 'no control plane was recorded');
}

interface Case {
  name: string;
  args: () => string[];
  /** Text the error must contain: the field or flag, and the rule. */
  says: RegExp;
}

const cases: Case[] = [
  { name: 'even replica count', args: () => ['up', '--name', 'bad', '--replicas', '4'], says: /spec\.replicas: must be odd, got 4/ },
  { name: 'zero replicas', args: () => ['up', '--name', 'bad', '--replicas', '0'], says: /spec\.replicas: must be at least 1/ },
  { name: 'too many replicas', args: () => ['up', '--name', 'bad', '--replicas', '11'], says: /spec\.replicas: must be at most 9/ },
  { name: 'replicas not a number', args: () => ['up', '--name', 'bad', '--replicas', 'three'], says: /--replicas: must be a whole number, got three/ },
  { name: 'replicas a string in the file', args: () => ['up', '-f', manifest('s', withSpec({ replicas: '3' }))], says: /spec\.replicas: must be a whole number/ },
  { name: 'fractional replicas in the file', args: () => ['up', '-f', manifest('f', withSpec({ replicas: 2.5 }))], says: /spec\.replicas: must be a whole number/ },
  { name: 'unknown etcd version', args: () => ['up', '--name', 'bad', '--version', '9.9.9'], says: /9\.9\.9.*install-etcd\.sh/s },
  { name: 'malformed version', args: () => ['up', '--name', 'bad', '--version', 'v3.4'], says: /spec\.version: must be an etcd version/ },
  { name: 'negative provisioning delay', args: () => ['up', '--name', 'bad', '--provisioning-delay', '-3s'], says: /--provisioning-delay: must be a duration/ },
  { name: 'reversed provisioning range', args: () => ['up', '--name', 'bad', '--provisioning-delay', '8s-3s'], says: /--provisioning-delay/ },
  { name: 'unknown strategy', args: () => ['up', '--name', 'bad', '--strategy', 'fast'], says: /spec\.scaleUp\.strategy: must be parallel or serial/ },
  { name: 'name that is not a DNS label', args: () => ['up', '--name', 'Bad_Name'], says: /metadata\.name: must be a DNS label/ },
  { name: 'no name and no file', args: () => ['up'], says: /give -f FILE or --name NAME/ },
  { name: 'unreadable file', args: () => ['up', '-f', join(env.stateDir, 'missing.yaml')], says: /cannot read the manifest \(ENOENT\)/ },
  { name: 'a folder given as the manifest', args: () => ['up', '-f', env.stateDir], says: /cannot read the manifest \(EISDIR\)/ },
  { name: 'YAML syntax error', args: () => ['up', '-f', manifest('syntax', 'spec: [replicas: 3\n')], says: /not valid YAML or JSON/ },
  { name: 'a YAML list instead of a mapping', args: () => ['up', '-f', manifest('list', '- a\n- b\n')], says: /must be a mapping/ },
  { name: 'wrong apiVersion', args: () => ['up', '-f', manifest('api', { ...GOOD, apiVersion: 'v1' })], says: /apiVersion: must be fastplane\.dev\/v1alpha1/ },
  { name: 'wrong kind', args: () => ['up', '-f', manifest('kind', { ...GOOD, kind: 'Cluster' })], says: /kind: must be ControlPlane/ },
  { name: 'unknown top-level field', args: () => ['up', '-f', manifest('extra', { ...GOOD, extra: 1 })], says: /extra/ },
  { name: 'unknown spec field', args: () => ['up', '-f', manifest('specextra', withSpec({ replica: 3 }))], says: /replica/ },
  { name: 'unknown provider', args: () => ['up', '-f', manifest('prov', withSpec({ provider: { name: 'aws' } }))], says: /spec\.provider\.name: unknown provider/ },
  { name: 'bad provisioning delay in the file', args: () => ['up', '-f', manifest('pd', withSpec({ provider: { provisioningDelay: 'soon' } }))], says: /spec\.provider\.provisioningDelay/ },
  { name: 'duplicate failure domains', args: () => ['up', '-f', manifest('fd', withSpec({ provider: { failureDomains: ['a', 'a'] } }))], says: /spec\.provider\.failureDomains: must not repeat/ },
  { name: 'maxLearners above 1 on etcd 3.4', args: () => ['up', '-f', manifest('ml', withSpec({ version: '3.4.23', etcd: { maxLearners: 2 } }))], says: /spec\.etcd\.maxLearners: above 1 needs etcd 3\.6/ },
  { name: 'unknown reconfiguration check flag', args: () => ['up', '--name', 'bad', '--reconfiguration-check', 'none'], says: /--reconfiguration-check: must be etcd or fastplane, got none/ },
  { name: 'unknown reconfiguration check in the file', args: () => ['up', '-f', manifest('rc', withSpec({ etcd: { reconfigurationCheck: 'off' } }))], says: /spec\.etcd\.reconfigurationCheck: must be etcd or fastplane/ },
  { name: 'maxSurge 0 with one replica', args: () => ['up', '-f', manifest('ms', withSpec({ replicas: 1, rollout: { maxSurge: 0 } }))], says: /spec\.rollout\.maxSurge: 0 \(remove before add\) needs at least 3 replicas/ },
  { name: 'negative maxSurge', args: () => ['up', '-f', manifest('ns', withSpec({ rollout: { maxSurge: -1 } }))], says: /spec\.rollout\.maxSurge/ },
  { name: 'bad remediation duration', args: () => ['up', '-f', manifest('rd', withSpec({ remediation: { unhealthyAfter: '10 seconds' } }))], says: /spec\.remediation\.unhealthyAfter/ },
  { name: 'flag contradicts the file', args: () => ['up', '-f', manifest('contra', GOOD), '--name', 'other'], says: /--name other contradicts metadata\.name bad/ },
  { name: 'bad output format', args: () => ['up', '--name', 'bad', '-o', 'xml'], says: /-o: must be table, json or yaml/ },
  { name: 'bad timeout', args: () => ['up', '--name', 'bad', '--timeout', 'forever'], says: /--timeout: must be a positive duration/ },
  { name: 'unknown flag', args: () => ['up', '--name', 'bad', '--replicaz', '3'], says: /unknown option/ },
  { name: 'a Kubernetes version not installed', args: () => ['up', '--name', 'bad', '--kubernetes', '1.35.0'], says: /Kubernetes 1\.35\.0 is not installed \(found: [^)]*1\.36\.3[^)]*\).*install-kubernetes\.sh/s },
  { name: 'a malformed Kubernetes version', args: () => ['up', '--name', 'bad', '--kubernetes', '1.36'], says: /spec\.kubernetes\.version: must be a Kubernetes version such as 1\.36\.3/ },
  { name: 'Kubernetes without certificates', args: () => ['up', '--name', 'bad', '--kubernetes', '1.36.3', '--insecure'], says: /spec\.kubernetes: needs certificates/ },
  { name: 'rollout without a version', args: () => ['rollout', 'nope'], says: /give --version \(etcd\) or --kubernetes-version, or both/ },
  { name: 'kubeconfig of a control plane that does not exist', args: () => ['kubeconfig', 'nope'], says: /no control plane named nope/ },
  { name: 'scale of a control plane that does not exist', args: () => ['scale', 'nope', '--replicas', '3'], says: /no control plane named nope/ },
  { name: 'status of a control plane that does not exist', args: () => ['status', 'nope'], says: /no control plane named nope/ },
  { name: 'down of a control plane that does not exist', args: () => ['down', 'nope'], says: /no control plane named nope/ },
];

describe('bad input exits 2, names the problem and creates nothing', { timeout: 240_000 }, () => {
  for (const c of cases) {
    test(c.name, async () => {
      const run = await env.run(c.args());
      assert.equal(run.code, 2, `exit code (stderr: ${run.stderr})`);
      assert.match(run.stderr, c.says);
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
      assertNothingCreated();
    });
  }

  describe('an address that is already taken', () => {
    let server: Server;
    before(async () => {
      // The first machine of the first cluster in this state dir would get 127.67.1.1.
      server = createServer();
      await new Promise<void>((resolve) => server.listen(2380, '127.67.1.1', resolve));
    });
    after(() => {
      server.close();
    });

    // Not an input error any more: a block in use on the host is skipped when a slot is claimed (a
    // taken address inside a cluster's own block is still exit 2: test/integration/local-process-provider.test.ts).
    test('its block is skipped: the cluster gets the next block, and down leaves nothing behind', async () => {
      const run = await env.run(['up', '--name', 'taken', '--replicas', '1', '--timeout', '30s', '-o', 'json']);
      assert.equal(run.code, 0, run.stderr);
      const endpoint = (JSON.parse(run.stdout) as { status: { endpoints: string[] } }).status.endpoints[0] ?? '';
      assert.ok(endpoint !== '' && !endpoint.includes('//127.67.1.'), `not in the taken block: ${endpoint}`);
      const down = await env.run(['down', 'taken']);
      assert.equal(down.code, 0, down.stderr);
      assertNothingCreated();
    });
  });

  describe('test hooks are off unless FASTPLANE_TEST_HOOKS=1', () => {
    test('a failpoint, an injected fault or an address prefix without the gate is refused, naming the variable', async () => {
      for (const variable of ['FASTPLANE_FAILPOINTS', 'FASTPLANE_INJECT_FAULTS', 'FASTPLANE_CERT_VALIDITY']) {
        const run = await env.run(['up', '--name', 'hooks', '--replicas', '1'], { FASTPLANE_TEST_HOOKS: '', FASTPLANE_ADDRESS_PREFIX: '', [variable]: 'after-promote' });
        assert.equal(run.code, 2, run.stderr);
        assert.match(run.stderr, new RegExp(`${variable}: a test hook, refused unless FASTPLANE_TEST_HOOKS=1`));
        assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
      }
      const prefix = await env.run(['status'], { FASTPLANE_TEST_HOOKS: '' });
      assert.equal(prefix.code, 2, prefix.stderr);
      assert.match(prefix.stderr, /FASTPLANE_ADDRESS_PREFIX: a test hook/);
      assertNothingCreated();
    });

    test('with the gate: an unknown failpoint or fault, or an address prefix off loopback, is refused', async () => {
      const cases: [Record<string, string>, RegExp][] = [
        [{ FASTPLANE_FAILPOINTS: 'after-lunch' }, /FASTPLANE_FAILPOINTS: unknown failpoint after-lunch; known: after-create-record,/],
        [{ FASTPLANE_INJECT_FAULTS: 'everything' }, /FASTPLANE_INJECT_FAULTS: unknown fault everything/],
        [{ FASTPLANE_ADDRESS_PREFIX: '10.1' }, /FASTPLANE_ADDRESS_PREFIX: must be 127\.N with N in 0\.\.255 .*127\.0\.0\.0\/8.*got 10\.1/],
        [{ FASTPLANE_ADDRESS_PREFIX: '127.300' }, /FASTPLANE_ADDRESS_PREFIX: must be 127\.N/],
        [{ FASTPLANE_CERT_VALIDITY: 'soon' }, /FASTPLANE_CERT_VALIDITY: must be a positive duration such as 480h, got soon/],
      ];
      const ttl = await env.run(['--lease-ttl', '0.5s', 'up', '--name', 'hooks', '--replicas', '1']);
      assert.equal(ttl.code, 2, ttl.stderr);
      assert.match(ttl.stderr, /--lease-ttl: must be a duration of 1s or more/);
      for (const [extra, says] of cases) {
        const run = await env.run(['up', '--name', 'hooks', '--replicas', '1'], extra);
        assert.equal(run.code, 2, `${JSON.stringify(extra)}: ${run.stderr}`);
        assert.match(run.stderr, says);
      }
      assertNothingCreated();
    });
  });
});
