import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ensureRemoteCopy } from '../../src/adapters/providers/ssh/remote-files.ts';
import { localHostShell } from '../support/local-host-shell.ts';

// A program copied to a host, run through the ssh provider's own commands on a local shell: copied
// once, then found by the sha256 recorded beside the verified copy; a changed program or a copy
// without its record is copied again; a copy damaged on its way is refused and not left in place.

const root = mkdtempSync(join(tmpdir(), 'fastplane-remote-copy-'));
after(() => {
  rmSync(root, { recursive: true, force: true });
});
const target = { address: '198.18.0.1', port: 22, user: 'root' };

function program(name: string, body: string): string {
  const file = join(root, name);
  writeFileSync(file, `#!/bin/sh\necho ${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

describe('a program copied to a host', () => {
  test('is uploaded once, then recognised by its recorded sha256', async () => {
    const local = program('kube-apiserver', 'one');
    const remote = join(root, 'host-1', 'bin', 'kube-apiserver-1.36.3');
    const host = localHostShell();
    assert.equal(await ensureRemoteCopy(host, target, local, remote), remote);
    assert.equal(await ensureRemoteCopy(host, target, local, remote), remote);
    assert.equal(host.uploads.length, 1);
    assert.equal(readFileSync(remote, 'utf8'), readFileSync(local, 'utf8'));
    assert.equal(statSync(remote).mode & 0o777, 0o755);
    assert.match(readFileSync(`${remote}.sha256`, 'utf8'), /^[0-9a-f]{64}\n$/);
  });

  test('is copied again when the local program changed or the host lost the record', async () => {
    const local = program('etcd', 'first build');
    const remote = join(root, 'host-2', 'bin', 'etcd-3.6.17');
    const host = localHostShell();
    await ensureRemoteCopy(host, target, local, remote);
    writeFileSync(local, '#!/bin/sh\necho second build\n');
    utimesSync(local, new Date(), new Date(Date.now() + 5_000));
    await ensureRemoteCopy(host, target, local, remote);
    assert.equal(host.uploads.length, 2);
    assert.equal(readFileSync(remote, 'utf8'), readFileSync(local, 'utf8'));
    rmSync(`${remote}.sha256`);
    await ensureRemoteCopy(host, target, local, remote);
    assert.equal(host.uploads.length, 3, 'a copy without its record is not trusted');
  });

  test('a copy damaged on its way is refused and nothing is left in place', async () => {
    const local = program('kube-scheduler', 'three');
    const remote = join(root, 'host-3', 'bin', 'kube-scheduler-1.36.3');
    const host = localHostShell();
    const upload = host.upload;
    host.upload = async (hostTarget, from, to) => {
      await upload(hostTarget, from, to);
      writeFileSync(to, 'damaged');
    };
    await assert.rejects(ensureRemoteCopy(host, target, local, remote), /wrong sha256/);
    assert.throws(() => statSync(remote));
    assert.throws(() => statSync(`${remote}.sha256`));
  });
});
