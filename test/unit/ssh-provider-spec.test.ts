import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { API_VERSION, KIND, validateControlPlane } from '../../src/api/control-plane.ts';
import { InvalidInputError } from '../../src/api/errors.ts';
import { SSH_MESSAGES } from '../../src/api/ssh-provider.ts';
import { sshProviderFor } from '../../src/adapters/providers/ssh/ssh-provider-config.ts';
import { ProvisioningFailed, runCreateHook } from '../../src/adapters/providers/ssh/provision-hooks.ts';
import { knownKeys } from '../../src/adapters/providers/ssh/ssh-connections.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { problemsOf } from '../support/problems.ts';

const dir = mkdtempSync(join(tmpdir(), 'fastplane-ssh-spec-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});
const key = join(dir, 'id');
const knownHosts = join(dir, 'known_hosts');
writeFileSync(key, 'not used by these tests');
writeFileSync(knownHosts, '');

const hosts = (n: number) => Array.from({ length: n }, (_, i) => ({ address: `198.18.0.${String(11 + i)}` }));

function ssh(provider: Record<string, unknown>, spec: Record<string, unknown> = {}): unknown {
  return { apiVersion: API_VERSION, kind: KIND, metadata: { name: 't' }, spec: { replicas: 3, ...spec, provider: { name: 'ssh', identityFile: key, knownHostsFile: knownHosts, ...provider } } };
}

describe('ssh provider spec', () => {
  test('an inventory of replicas + maxSurge hosts is enough, with defaults for port and user', () => {
    const cp = validateControlPlane(ssh({ hosts: hosts(4) }));
    assert.deepEqual(cp.spec.provider.hosts?.[0], { address: '198.18.0.11', port: 22, user: 'root' });
  });

  test('fewer hosts than replicas + maxSurge names spec.provider.hosts and the count needed', () => {
    assert.deepEqual(problemsOf(() => validateControlPlane(ssh({ hosts: hosts(4) }, { replicas: 5 }))), [
      'spec.provider.hosts: needs at least replicas + rollout.maxSurge = 6 hosts, got 4',
    ]);
  });

  test('a duplicate host names its index', () => {
    const list = [...hosts(3), { address: '198.18.0.12', port: 22 }];
    assert.deepEqual(problemsOf(() => validateControlPlane(ssh({ hosts: list }))), ['spec.provider.hosts.3.address: duplicate host 198.18.0.12:22']);
  });

  test('key files are required, and ssh fields on another provider are refused', () => {
    const problems = problemsOf(() => validateControlPlane({ apiVersion: API_VERSION, kind: KIND, metadata: { name: 't' }, spec: { provider: { name: 'ssh', hosts: hosts(4) } } }));
    assert.deepEqual([...problems].sort(), ['spec.provider.identityFile: is required for provider ssh (the private key fastplane logs in with)', 'spec.provider.knownHostsFile: is required for provider ssh (host keys are always verified)']);
    assert.deepEqual(problemsOf(() => validateControlPlane({ apiVersion: API_VERSION, kind: KIND, metadata: { name: 't' }, spec: { provider: { hosts: hosts(4) } } })), ['spec.provider.hosts: only for provider ssh (this is local-process)']);
  });

  test('hooks replace the inventory: no host count, but not both', () => {
    assert.equal(validateControlPlane(ssh({ provision: { create: 'true' } }, { replicas: 5 })).spec.provider.provision?.timeout, '10m');
    assert.deepEqual(problemsOf(() => validateControlPlane(ssh({ provision: { create: 'true' }, hosts: hosts(4) }))), ['spec.provider.hosts: give either hosts or provision hooks, not both']);
  });

  test('Kubernetes on ssh needs exactly one endpoint, never on a machine host; an endpoint needs Kubernetes', () => {
    const k8s = { kubernetes: { version: '1.36.3' } };
    assert.deepEqual(problemsOf(() => validateControlPlane(ssh({ hosts: hosts(4) }, k8s))), [`spec.provider.endpoint: ${SSH_MESSAGES.endpointRequired()}`]);
    assert.deepEqual(problemsOf(() => validateControlPlane(ssh({ hosts: hosts(4), endpoint: { host: { address: '198.18.0.30' }, loadBalancer: 'lb:6443' } }, k8s))), [`spec.provider.endpoint: ${SSH_MESSAGES.endpointOneOf()}`]);
    assert.deepEqual(problemsOf(() => validateControlPlane(ssh({ hosts: hosts(4), endpoint: { host: { address: '198.18.0.11' } } }, k8s))), [`spec.provider.endpoint.host.address: ${SSH_MESSAGES.endpointHostIsMachineHost('198.18.0.11')}`]);
    assert.deepEqual(problemsOf(() => validateControlPlane(ssh({ hosts: hosts(4), endpoint: { loadBalancer: 'lb:6443' } }))), [`spec.provider.endpoint: ${SSH_MESSAGES.endpointNeedsKubernetes()}`]);
    assert.equal(validateControlPlane(ssh({ hosts: hosts(4), endpoint: { host: { address: '198.18.0.30' } } }, k8s)).spec.provider.endpoint?.host?.port, 22);
  });

  test('a key file that does not exist is bad input naming the field', () => {
    const cp = validateControlPlane(ssh({ hosts: hosts(4), identityFile: join(dir, 'missing') }));
    const store = new MemoryStateStore();
    assert.throws(() => sshProviderFor(cp, { stateDir: dir, store, addressPrefix: '127.77', provisioningFailureMarker: false, certValidityMs: undefined }), (error: unknown) => error instanceof InvalidInputError && error.message === `spec.provider.identityFile: ${join(dir, 'missing')} does not exist`);
  });
});

describe('known_hosts', () => {
  const text = ['# comment', '198.18.0.11 ssh-ed25519 AAAA1', '[198.18.0.12]:2222 ssh-ed25519 AAAA2', '198.18.0.13,other ecdsa-sha2-nistp256 AAAA3'].join('\n');
  test('entries are found by address, and by [address]:port off port 22', () => {
    assert.deepEqual(knownKeys(text, { address: '198.18.0.11', port: 22, user: 'root' }), [{ type: 'ssh-ed25519', key: 'AAAA1' }]);
    assert.deepEqual(knownKeys(text, { address: '198.18.0.12', port: 2222, user: 'root' }), [{ type: 'ssh-ed25519', key: 'AAAA2' }]);
    assert.deepEqual(knownKeys(text, { address: '198.18.0.13', port: 22, user: 'root' }), [{ type: 'ecdsa-sha2-nistp256', key: 'AAAA3' }]);
    assert.deepEqual(knownKeys(text, { address: '198.18.0.12', port: 22, user: 'root' }), []);
  });
});

describe('provisioning hooks', () => {
  const request = { cluster: 'c', machine: 'c-1', version: '3.4.23', failureDomain: 'a' };
  test('the request arrives on stdin and the answer is read from stdout', async () => {
    const answer = await runCreateHook(`read -r line; case "$line" in *'"machine":"c-1"'*'"failureDomain":"a"'*) echo '{"address":"198.18.0.20"}';; *) exit 3;; esac`, request, 10_000);
    assert.deepEqual(answer, { address: '198.18.0.20', port: 22, user: 'root' });
  });

  test('a non-zero exit is ProvisioningFailed with the tail of stderr', async () => {
    await assert.rejects(runCreateHook(`echo quota exceeded in region x >&2; exit 7`, request, 10_000), (error: unknown) => error instanceof ProvisioningFailed && error.message === 'create hook exited 7: quota exceeded in region x');
  });

  test('an answer that is not the JSON expected is ProvisioningFailed saying what is wrong', async () => {
    await assert.rejects(runCreateHook(`echo created`, request, 10_000), /create hook did not answer JSON on stdout: created/);
    await assert.rejects(runCreateHook(`echo '{"port":22}'`, request, 10_000), /address: /);
  });
});
