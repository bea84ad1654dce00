import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ProvisioningFailed, runCreateHook } from '../../src/adapters/providers/ssh/provision-hooks.ts';
import { HOST_POOL, SshProvider } from '../../src/adapters/providers/ssh/ssh-provider.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';

// A create hook's answer names the host fastplane connects to and puts in the member's URLs and
// certificate: it is checked as an inventory address is, and a bad one is a failed machine that says
// why, before anything connects anywhere.

const dir = mkdtempSync(join(tmpdir(), 'fastplane-hooks-'));
const request = { cluster: 'c', machine: 'c-1', version: '3.5.16' };

/** A hook command that answers `answer` as JSON. */
const answering = (answer: unknown): string => `cat >/dev/null; printf '%s' '${JSON.stringify(answer)}'`;

const BAD_ADDRESSES = ['bad host', '300.1.1.1', '1.2.3', '-oProxyCommand=touch /tmp/pwned', 'http://h.example', 'a..b', 'x;reboot', ''];

describe('create hook answers', () => {
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  test('an IPv4 literal or a host name is taken, port and user defaulted', async () => {
    assert.deepEqual(await runCreateHook(answering({ address: '198.18.0.11' }), request, 5_000), { address: '198.18.0.11', port: 22, user: 'root' });
    assert.deepEqual(await runCreateHook(answering({ address: 'etcd-1.example.com', port: 2222, user: 'ops' }), request, 5_000), { address: 'etcd-1.example.com', port: 2222, user: 'ops' });
  });

  for (const address of BAD_ADDRESSES) {
    test(`address ${JSON.stringify(address)} is refused as an inventory address would be`, async () => {
      const error = await runCreateHook(answering({ address }), request, 5_000).then(
        () => assert.fail('accepted'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof ProvisioningFailed, String(error));
      assert.match(error.message, /^create hook answered .*: address: must be an IPv4 address or a host name$/);
    });
  }

  test('a machine whose hook answers a bad address is Failed with the reason, and holds no host', async () => {
    const store = new MemoryStateStore();
    const provider = new SshProvider({
      stateDir: join(dir, 'state'),
      hosts: [],
      // Never read: the answer is refused before any connection.
      identityFile: join(dir, 'no-key'),
      knownHostsFile: join(dir, 'no-known-hosts'),
      baseDir: '/var/lib/fastplane',
      findBinary: () => assert.fail('no binary is looked for'),
      version: '3.5.16',
      store,
      provision: { create: answering({ address: '-oProxyCommand=sh', port: 22 }), timeoutMs: 5_000 },
    });
    await assert.rejects(provider.create({ cluster: 'c', name: 'c-1', ordinal: 1 }), /address: must be an IPv4 address or a host name/);
    const described = await provider.describe('c', 'c-1');
    assert.equal(described?.state, 'Failed');
    assert.match(described.failureMessage ?? '', /^create hook answered \{"address":"-oProxyCommand=sh","port":22\}: address: must be an IPv4 address or a host name$/);
    assert.doesNotMatch(described.failureMessage ?? '', /\n\s+at /, 'no stack trace');
    assert.deepEqual(await store.listClaims(HOST_POOL), []);
    await provider.close();
  });
});
