import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { renderAccess } from '../../src/cli/commands/endpoints.ts';
import { chooseKeyFile, chooseStore } from '../../src/cli/store-selection.ts';

const dir = mkdtempSync(join(tmpdir(), 'fastplane-store-selection-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});
const file = (name: string): string => {
  const path = join(dir, name);
  writeFileSync(path, 'pem');
  return path;
};
const ca = file('ca.crt');
const cert = file('client.crt');
const key = file('client.key');

/** The problems of an input error, or a failure when the call did not throw one. */
function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof InvalidInputError) return error.problems;
    throw error;
  }
  return assert.fail('no input error');
}

describe('chooseStore', () => {
  test('sqlite in the state dir by default, whatever etcd variables are set', () => {
    assert.deepEqual(chooseStore({}, '/state', {}), { kind: 'sqlite', path: join('/state', 'fastplane.db') });
    assert.deepEqual(chooseStore({}, '/state', { FASTPLANE_ETCD_ENDPOINTS: 'http://10.0.0.1:2379' }).kind, 'sqlite');
  });

  test('etcd from flags, or from the variables, flags winning', () => {
    const flags = { store: 'etcd', etcdEndpoints: 'https://10.0.0.1:2379, https://10.0.0.2:2379', etcdCacert: ca, etcdCert: cert, etcdKey: key };
    assert.deepEqual(chooseStore(flags, '/state', {}), {
      kind: 'etcd',
      endpoints: ['https://10.0.0.1:2379', 'https://10.0.0.2:2379'],
      tls: { caFile: ca, certFile: cert, keyFile: key },
    });
    const env = { FASTPLANE_STORE: 'etcd', FASTPLANE_ETCD_ENDPOINTS: 'https://10.0.0.9:2379', FASTPLANE_ETCD_CACERT: ca, FASTPLANE_ETCD_CERT: cert, FASTPLANE_ETCD_KEY: key };
    assert.deepEqual(chooseStore({}, '/state', env), { kind: 'etcd', endpoints: ['https://10.0.0.9:2379'], tls: { caFile: ca, certFile: cert, keyFile: key } });
    assert.deepEqual(chooseStore({ etcdEndpoints: 'https://10.0.0.1:2379' }, '/state', env), { kind: 'etcd', endpoints: ['https://10.0.0.1:2379'], tls: { caFile: ca, certFile: cert, keyFile: key } });
    assert.equal(chooseStore({ store: 'sqlite' }, '/state', { FASTPLANE_STORE: 'etcd' }).kind, 'sqlite');
  });

  test('bad settings are input errors naming the flag or variable', () => {
    assert.match(problemsOf(() => chooseStore({ store: 'redis' }, '/s', {})).join(), /^--store: must be sqlite, etcd or kubernetes, got redis/);
    assert.match(problemsOf(() => chooseStore({}, '/s', { FASTPLANE_STORE: 'nope' })).join(), /^FASTPLANE_STORE: must be sqlite, etcd or kubernetes/);
    assert.match(problemsOf(() => chooseStore({ store: 'etcd' }, '/s', {})).join(), /^--etcd-endpoints: required with --store etcd/);
    assert.match(problemsOf(() => chooseStore({ store: 'etcd', etcdEndpoints: '10.0.0.1:2379', insecureStore: true }, '/s', {})).join(), /--etcd-endpoints: 10\.0\.0\.1:2379 is not a client URL/);
    assert.match(problemsOf(() => chooseStore({}, '/s', { FASTPLANE_STORE: 'etcd', FASTPLANE_ETCD_ENDPOINTS: 'ftp://x:1', FASTPLANE_INSECURE_STORE: '1' })).join(), /^FASTPLANE_ETCD_ENDPOINTS: ftp:\/\/x:1 is not a client URL/);
    const missing = problemsOf(() => chooseStore({ store: 'etcd', etcdEndpoints: 'https://h:2379', etcdCacert: join(dir, 'none.crt'), etcdCert: cert, etcdKey: dir }, '/s', {}));
    assert.deepEqual(missing, [`--etcd-cacert: no such file: ${join(dir, 'none.crt')}`, `--etcd-key: not a file: ${dir}`]);
    assert.match(problemsOf(() => chooseStore({ store: 'etcd', etcdEndpoints: 'https://h:2379', etcdCert: cert }, '/s', {})).join(), /^--etcd-key: required with --etcd-cert/);
    assert.match(problemsOf(() => chooseStore({ etcdCacert: ca }, '/s', {})).join(), /^--etcd-cacert: only with --store etcd/);
    assert.match(problemsOf(() => chooseStore({ insecureStore: true }, '/s', {})).join(), /^--insecure-store: only with --store etcd/);
  });

  test('--store kubernetes takes a kubeconfig file and a namespace; --kubeconfig alone (install, controller) leaves the store as it is', () => {
    const kubeconfig = file('admin.conf');
    assert.deepEqual(chooseStore({ store: 'kubernetes', kubeconfig }, '/s', {}), { kind: 'kubernetes', kubeconfig });
    assert.deepEqual(chooseStore({}, '/s', { FASTPLANE_STORE: 'kubernetes', FASTPLANE_KUBECONFIG: kubeconfig, FASTPLANE_STORE_NAMESPACE: 'records' }), { kind: 'kubernetes', kubeconfig, namespace: 'records' });
    assert.equal(chooseStore({ kubeconfig }, '/s', {}).kind, 'sqlite');
    assert.deepEqual(problemsOf(() => chooseStore({ store: 'kubernetes' }, '/s', {})), [
      '--kubeconfig: required with --store kubernetes (or FASTPLANE_KUBECONFIG): the kubeconfig of the cluster that keeps the records',
    ]);
    assert.deepEqual(problemsOf(() => chooseStore({ store: 'kubernetes', kubeconfig: join(dir, 'none.conf'), storeNamespace: 'Bad_NS', etcdCert: cert }, '/s', {})), [
      '--etcd-cert: only with --store etcd (the store is kubernetes from --store)',
      `--kubeconfig: no such file: ${join(dir, 'none.conf')}`,
      '--store-namespace: must be a namespace name (a DNS label), got Bad_NS',
    ]);
    assert.match(problemsOf(() => chooseStore({ storeNamespace: 'records' }, '/s', {})).join(), /^--store-namespace: only with --store kubernetes/);
  });

  test('plain http or no client certificate is refused unless --insecure-store (or FASTPLANE_INSECURE_STORE=1) says so', () => {
    const http = { store: 'etcd', etcdEndpoints: 'https://10.0.0.1:2379,http://10.0.0.2:2379', etcdCacert: ca, etcdCert: cert, etcdKey: key };
    assert.deepEqual(problemsOf(() => chooseStore(http, '/s', {})), [
      '--etcd-endpoints: http://10.0.0.2:2379 is plain http, readable and changeable on the way; use https with a client certificate, or pass --insecure-store',
    ]);
    assert.deepEqual(problemsOf(() => chooseStore({}, '/s', { FASTPLANE_STORE: 'etcd', FASTPLANE_ETCD_ENDPOINTS: 'https://10.0.0.1:2379', FASTPLANE_ETCD_CACERT: ca })), [
      '--etcd-cert: required with --store etcd (a client certificate the store authenticates, with --etcd-key), or pass --insecure-store',
    ]);
    assert.deepEqual(chooseStore({ ...http, insecureStore: true }, '/s', {}), { kind: 'etcd', endpoints: ['https://10.0.0.1:2379', 'http://10.0.0.2:2379'], tls: { caFile: ca, certFile: cert, keyFile: key } });
    assert.deepEqual(chooseStore({ store: 'etcd', etcdEndpoints: 'http://10.0.0.1:2379' }, '/s', { FASTPLANE_INSECURE_STORE: '1' }), { kind: 'etcd', endpoints: ['http://10.0.0.1:2379'], tls: {} });
  });
});

describe('chooseKeyFile', () => {
  test("the state dir's secrets.key, made when missing; a named file (flag winning over variable) must be there", () => {
    assert.deepEqual(chooseKeyFile({}, '/state', {}), { path: join('/state', 'secrets.key'), create: true });
    assert.deepEqual(chooseKeyFile({}, '/state', { FASTPLANE_SECRETS_KEY: '/keys/a' }), { path: '/keys/a', create: false });
    assert.deepEqual(chooseKeyFile({ secretsKey: '/keys/b' }, '/state', { FASTPLANE_SECRETS_KEY: '/keys/a' }), { path: '/keys/b', create: false });
  });
});

describe('endpoints output', () => {
  const access = { endpoints: ['https://127.77.1.1:2379', 'https://127.77.1.2:2379'], cacert: '/p/ca.crt', cert: '/p/client.crt', key: "/it's here/client.key" };

  test('as flags, as export lines (quoted for the shell) and as JSON', () => {
    assert.equal(
      renderAccess(access, 'flags'),
      `--store etcd --etcd-endpoints https://127.77.1.1:2379,https://127.77.1.2:2379 --etcd-cacert /p/ca.crt --etcd-cert /p/client.crt --etcd-key '/it'\\''s here/client.key'`,
    );
    assert.equal(
      renderAccess(access, 'env'),
      [
        'export FASTPLANE_STORE=etcd',
        'export FASTPLANE_ETCD_ENDPOINTS=https://127.77.1.1:2379,https://127.77.1.2:2379',
        'export FASTPLANE_ETCD_CACERT=/p/ca.crt',
        'export FASTPLANE_ETCD_CERT=/p/client.crt',
        `export FASTPLANE_ETCD_KEY='/it'\\''s here/client.key'`,
      ].join('\n'),
    );
    assert.deepEqual(JSON.parse(renderAccess(access, 'json')), access);
    assert.equal(renderAccess({ endpoints: ['http://127.77.1.1:2379'] }, 'flags'), '--store etcd --etcd-endpoints http://127.77.1.1:2379 --insecure-store', 'an insecure cluster has no TLS flags and says so');
    assert.equal(renderAccess({ endpoints: ['http://127.77.1.1:2379'] }, 'env').split('\n').at(-1), 'export FASTPLANE_INSECURE_STORE=1');
    assert.throws(() => renderAccess(access, 'yaml'), /-o: must be flags, env or json/);
  });
});
