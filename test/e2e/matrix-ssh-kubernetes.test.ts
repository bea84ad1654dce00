import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { cliEnvFactory } from '../support/cli.ts';
import { kvClientFor } from '../support/etcd-direct.ts';
import { TEST_KUBERNETES, TEST_KUBERNETES_NEXT } from '../support/kubectl.ts';
import { resultsTable, ROWS, runRow, type MatrixSite } from '../support/matrix-run.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';
import { startSingleEtcd, type SingleEtcd } from '../support/single-etcd.ts';
import { installKubernetesPrograms, sshKubernetesProvider } from '../support/ssh-kubernetes.ts';

// The combination matrix's Kubernetes row (test/support/matrix-kubernetes.ts says what it does) on a
// network lab of its own: six machine hosts (the provider wants replicas + maxSurge of them: 5 + 1
// when scaled) and the endpoint host, with one etcd as the row's record store. The machine hosts
// carry the Kubernetes programs as a machine image would.
const lab = new NetLab(68);
let store: SingleEtcd | undefined;

// Registered before the env factory's clean-up (hooks run in order): the lab's namespaces (and every
// process in them) and the store etcd go first, by PID; then the env kills what is left under its dir.
after(async () => {
  site.store?.kv.close();
  lab.down();
  await store?.stop();
  console.log(resultsTable(site.results));
});
const site: MatrixSite = { env: cliEnvFactory()('127.55'), results: [] };

describe('the combination matrix, Kubernetes on the ssh provider', () => {
  before(async () => {
    site.lab = lab.up(7);
    // Both versions' programs baked into the machine hosts.
    await installKubernetesPrograms(site.lab, [TEST_KUBERNETES, TEST_KUBERNETES_NEXT]);
    store = await startSingleEtcd('127.55.250.1');
    site.store = { endpoint: store.endpoint, kv: kvClientFor({ endpoints: [store.endpoint] }) };
  });

  test('Kubernetes on ssh without an endpoint, or with a machine host as endpoint host, exits 2 and changes nothing', async () => {
    const info: LabInfo | undefined = site.lab;
    assert.ok(info);
    const provider = sshKubernetesProvider(info);
    const spec = (endpoint: unknown): Record<string, unknown> => ({ replicas: 3, kubernetes: { version: TEST_KUBERNETES }, provider: { ...provider, endpoint } });
    const refused = await site.env.run(['up', '-f', site.env.writeManifest('bad', spec(undefined))]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /spec\.provider\.endpoint: is required for a Kubernetes control plane on provider ssh/);
    const machineHost = info.hosts[0]?.address ?? '';
    const shared = await site.env.run(['up', '-f', site.env.writeManifest('bad', spec({ host: { address: machineHost } }))]);
    assert.equal(shared.code, 2, shared.stderr);
    assert.ok(shared.stderr.includes(`spec.provider.endpoint.host.address: ${machineHost} is also one of spec.provider.hosts`), shared.stderr);
    assert.notEqual((await site.env.run(['status', 'bad'])).code, 0, 'no control plane bad was recorded');
  });

  ROWS.forEach((row, index) => {
    if (row.scenario !== 'kubernetes') return;
    test(`mx${String(index + 1)}: ${row.scenario}, ${row.provider}, ${row.store} store, ${row.check} check, ${row.driver}`, { timeout: 1_200_000 }, () => runRow(site, index, row));
  });
});
