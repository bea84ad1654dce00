import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidInputError } from '../../src/api/errors.ts';
import { KubernetesStateStore, type KubernetesStateStoreOptions } from '../../src/adapters/stores/kubernetes-state-store.ts';
import { FencedOutError, type StateStore } from '../../src/ports/state-store.ts';
import { cliEnvFactory, type CliEnv } from '../support/cli.ts';
import { kubectlFor, TEST_KUBERNETES, type Kubectl } from '../support/kubectl.ts';
import { holder, leased, manifest, T0 } from '../support/state-store-records.ts';
import { defineStateStoreContract } from './state-store-contract.ts';

// One real kube-apiserver for the whole file (a one-machine Kubernetes control plane fastplane brings
// up, on its own etcd member); each case has its own namespace, so cases never see each other's objects.
let env: CliEnv | undefined;
// Registered before the env factory's clean-up (hooks run in order): `down` stops the apiserver and
// etcd by their PIDs while the state dir is still there; the env's clean-up then kills anything left.
after(async () => {
  const down = await env?.run(['down', 'mgmt']);
  assert.equal(down?.code, 0, down?.stderr);
});
const newEnv = cliEnvFactory();
let kubectl: Kubectl | undefined;
let namespaces = 0;

before(async () => {
  env = newEnv('127.49');
  const up = await env.run(['up', '--name', 'mgmt', '--replicas', '1', '--kubernetes', TEST_KUBERNETES, '--timeout', '150s']);
  assert.equal(up.code, 0, up.stderr);
  kubectl = await kubectlFor(env, 'mgmt');
});

function server(): Kubectl {
  if (kubectl === undefined) throw new Error('the API server did not start');
  return kubectl;
}

const open = (namespace: string, options: Partial<KubernetesStateStoreOptions> = {}): KubernetesStateStore => new KubernetesStateStore({ kubeconfig: server().kubeconfig, namespace, ...options });

defineStateStoreContract('kubernetes', () => {
  const namespace = `contract-${String(++namespaces)}`;
  const store = open(namespace);
  return { store, connect: () => open(namespace), cleanup: () => store.close() };
});

async function snapshot(store: StateStore, cluster: string) {
  return { cp: await store.getControlPlane(cluster), machines: await store.listMachines(cluster), events: await store.listEvents(cluster) };
}

describe('KubernetesStateStore', { timeout: 60_000 }, () => {
  test('a deposed holder whose Lease check passed is refused by the fence the new holder recorded, though its read of the records is current', async () => {
    const namespace = 'fencing';
    const successor = open(namespace);
    let takeovers = 0;
    // The deposed holder's process: between its Lease check and its read of the records, another takes the Lease.
    const deposed = open(namespace, {
      afterLeaseCheck: async (cluster) => {
        if (takeovers++ === 0) assert.equal(await successor.acquireLease(cluster, holder('successor'), T0 + 1, { force: true }), true);
      },
    });
    try {
      const lease = await leased(deposed, 'alpha');
      const before = await snapshot(deposed, 'alpha');
      const versionBefore = await server().run(['get', 'configmap', 'fastplane-cluster-alpha', '-n', namespace, '-o', 'jsonpath={.metadata.resourceVersion}']);
      await assert.rejects(deposed.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1' } }]), FencedOutError);
      assert.equal(takeovers, 1, 'refused on the first attempt: by the fence, not by a later Lease check');
      assert.deepEqual(await snapshot(successor, 'alpha'), before, 'nothing of the deposed batch landed');
      const stored = await server().json<{ metadata: { resourceVersion: string }; data: { fence: string } }>(['get', 'configmap', 'fastplane-cluster-alpha', '-n', namespace]);
      const successorFence = (await successor.getLease('alpha'))?.fence;
      assert.equal(Number(stored.data.fence), successorFence, 'the records carry the new holder\'s fence');
      assert.notEqual(stored.metadata.resourceVersion, versionBefore, 'the takeover itself wrote the fence into the records');
      // The successor writes on, and the Lease shows it.
      await successor.commit({ cluster: 'alpha', token: 'successor' }, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1' } }]);
      assert.equal((await successor.getControlPlane('alpha'))?.initMachine, 'alpha-1');
      const object = await server().json<{ spec: { holderIdentity: string; leaseTransitions: number } }>(['get', 'lease', 'fastplane-cluster-alpha', '-n', namespace]);
      assert.deepEqual([object.spec.holderIdentity, object.spec.leaseTransitions], ['successor', 1]);
    } finally {
      await deposed.close();
      await successor.close();
    }
  });

  test("a Lease expires on the observer's clock, from when it last saw the Lease change: never by comparing renewTime with its own", async () => {
    const namespace = 'expiry';
    const holderStore = open(namespace);
    const observer = open(namespace);
    try {
      await holderStore.applySpec(manifest('alpha'), T0);
      assert.equal(await holderStore.acquireLease('alpha', holder('holder', { ttlMs: 2_000 }), Date.now()), true);
      const setRenewTime = (time: string) => server().run(['patch', 'lease', 'fastplane-cluster-alpha', '-n', namespace, '--type', 'merge', '-p', JSON.stringify({ spec: { renewTime: time } })]);
      // A holder clock far behind: renewTime says it expired long ago; the observer just saw it change.
      await setRenewTime('2000-01-01T00:00:00.000000Z');
      assert.equal(await observer.acquireLease('alpha', holder('observer'), Date.now()), false, 'a renewal just seen is live, whatever time it names');
      // A holder clock far ahead: renewTime in 2100; still it expires once nothing changed for 2 s.
      await setRenewTime('2100-01-01T00:00:00.000000Z');
      const changed = Date.now();
      let tries = 0;
      while (!(await observer.acquireLease('alpha', holder('observer'), Date.now()))) {
        assert.ok(++tries < 100, 'taken within 10 s of its 2 s duration');
        await sleep(100);
      }
      const waited = Date.now() - changed;
      assert.ok(waited >= 2_000, `not before the Lease's duration after the last change seen: ${String(waited)} ms`);
      assert.equal(await holderStore.renewLease('alpha', 'holder', Date.now()), undefined, 'the old holder learns it lost the lease');
      const object = await server().json<{ spec: { holderIdentity: string; leaseDurationSeconds: number } }>(['get', 'lease', 'fastplane-cluster-alpha', '-n', namespace]);
      assert.deepEqual([object.spec.holderIdentity, object.spec.leaseDurationSeconds], ['observer', 10]);
    } finally {
      await holderStore.close();
      await observer.close();
    }
  });

  test('an API server that does not answer is bad input at the first call, naming the kubeconfig and the server', async () => {
    const file = join(env?.stateDir ?? '', 'nowhere.kubeconfig');
    writeFileSync(file, readFileSync(server().kubeconfig, 'utf8').replace(/server: https:\/\/[^\s]+/, 'server: https://127.49.255.254:6443'));
    const store = new KubernetesStateStore({ kubeconfig: file });
    try {
      await assert.rejects(store.listControlPlanes(), (error: unknown) => {
        assert.ok(error instanceof InvalidInputError, String(error));
        assert.match(error.message, /nowhere\.kubeconfig: kubernetes store unreachable at https:\/\/127\.49\.255\.254:6443/);
        return true;
      });
    } finally {
      await store.close();
    }
  });
});
