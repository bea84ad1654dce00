import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ControlPlaneStatus } from '../../src/api/control-plane-status.ts';
import type { CliContext } from '../../src/cli/context.ts';
import { Controller } from '../../src/controller/controller.ts';
import { ObjectSync, TEARDOWN_FINALIZER } from '../../src/controller/object-sync.ts';
import { systemTimers } from '../../src/controller/timers.ts';
import { systemClock } from '../../src/ports/clock.ts';
import { ConflictError, type ControlPlaneObject, type ControlPlaneObjects, type ObjectEvent, type ObjectRef } from '../../src/ports/control-plane-objects.ts';
import { isRunning, pidsUnder } from '../support/cli.ts';

// The bridge from ControlPlane objects to the record store, in one process over real etcd members:
// the objects' API is an in-memory stand-in that keeps resourceVersions as the API server does.

/** The object side of an API server: resourceVersions, finalizers that hold a deletion, the status subresource. */
class MemoryObjects implements ControlPlaneObjects {
  readonly objects = new Map<string, ControlPlaneObject>();
  readonly statuses = new Map<string, ControlPlaneStatus>();
  readonly events: ObjectEvent[] = [];
  statusWrites = 0;
  private version = 0;
  private onObject: ((object: ControlPlaneObject) => void) | undefined;

  put(name: string, spec: unknown, change: Partial<ControlPlaneObject> = {}): void {
    const old = this.objects.get(name);
    const object: ControlPlaneObject = { namespace: 'default', name, uid: `uid-${name}`, generation: (old?.generation ?? 0) + (change.deleting === true ? 0 : 1), resourceVersion: String(++this.version), finalizers: old?.finalizers ?? [], deleting: false, spec, ...change };
    if (object.deleting && object.finalizers.length === 0) this.objects.delete(name);
    else this.objects.set(name, object);
    this.onObject?.(object);
  }

  watch(onObject: (object: ControlPlaneObject) => void): { close(): void } {
    this.onObject = onObject;
    for (const object of this.objects.values()) onObject(object);
    return { close: () => (this.onObject = undefined) };
  }

  setFinalizers(object: ControlPlaneObject, finalizers: string[]): Promise<void> {
    const current = this.objects.get(object.name);
    if (current?.resourceVersion !== object.resourceVersion) return Promise.reject(new ConflictError('conflict'));
    const next = { ...current, finalizers, resourceVersion: String(++this.version) };
    if (next.deleting && finalizers.length === 0) this.objects.delete(object.name);
    else this.objects.set(object.name, next);
    this.onObject?.(next);
    return Promise.resolve();
  }

  writeStatus(ref: ObjectRef, status: ControlPlaneStatus): Promise<void> {
    this.statuses.set(ref.name, status);
    this.statusWrites++;
    return Promise.resolve();
  }

  recordEvent(_ref: ObjectRef, event: ObjectEvent): Promise<void> {
    this.events.push(event);
    return Promise.resolve();
  }

  missingPermissions(): Promise<string[]> {
    return Promise.resolve([]);
  }
}

async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('ObjectSync: ControlPlane objects reconciled through the record store', { timeout: 180_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-objects-'));
  const objects = new MemoryObjects();
  let ctx: CliContext;
  let controller: Controller;
  let sync: ObjectSync;
  const forbidden: Error[] = [];

  const available = (name: string): NonNullable<ControlPlaneStatus['conditions']>[number] | undefined => objects.statuses.get(name)?.conditions?.find((c) => c.type === 'Available');

  before(async () => {
    process.env.FASTPLANE_TEST_HOOKS = '1';
    process.env.FASTPLANE_ADDRESS_PREFIX = '127.48';
    const { CliContext } = await import('../../src/cli/context.ts');
    ctx = new CliContext(dir, 'silent', undefined, '3s');
    sync = new ObjectSync({ runtime: ctx, objects, clock: systemClock, timers: systemTimers, onForbidden: (error) => forbidden.push(error) });
    controller = new Controller({
      store: ctx.store,
      id: 'object-sync-test',
      clock: systemClock,
      timers: systemTimers,
      maxConcurrentReconciles: 4,
      leaseTtlMs: ctx.leaseTtlMs,
      depsFor: async (manifest, writer, notify) =>
        ctx.passDeps(await ctx.clusterPorts(manifest), (event) => {
          notify(event);
          sync.onEvent(event);
        })(writer),
    });
    await controller.start();
    sync.start();
  });

  test('an object gets the finalizer, its spec is stored and converges; status and Events come back', async () => {
    objects.put('web', { replicas: 1 });
    const condition = await waitFor('Available True', () => (available('web')?.status === 'True' ? available('web') : undefined));
    assert.equal(condition.reason, 'QuorumHealthy');
    assert.equal(condition.observedGeneration, 1);
    assert.deepEqual(objects.objects.get('web')?.finalizers, [TEARDOWN_FINALIZER]);
    assert.equal((await ctx.store.getControlPlane('web'))?.generation, 1);
    assert.ok(objects.events.some((e) => e.reason === 'InitCluster' && e.type === 'Normal'), objects.events.map((e) => e.reason).join(', '));
    // Converged: the status stops changing, so it stops being written.
    await waitFor('a status that stays', async () => {
      const writes = objects.statusWrites;
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      return objects.statusWrites === writes ? true : undefined;
    });
  });

  test('the same generation delivered again (a re-list) stores nothing new', async () => {
    const object = objects.objects.get('web');
    assert.ok(object);
    objects.put('web', object.spec, { generation: object.generation });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal((await ctx.store.getControlPlane('web'))?.generation, 1);
  });

  test('a spec the CLI refuses is Available False, reason InvalidSpec, and is not stored', async () => {
    objects.put('web', { replicas: 1, version: '3.9.1' });
    const condition = await waitFor('InvalidSpec', () => (available('web')?.reason === 'InvalidSpec' ? available('web') : undefined));
    assert.equal(condition.status, 'False');
    assert.match(condition.message ?? '', /3\.9\.1/);
    assert.equal(condition.observedGeneration, 2);
    assert.equal((await ctx.store.getControlPlane('web'))?.manifest.spec.version, '3.6.17', 'the running spec stays');
    assert.deepEqual(forbidden, []);
  });

  test('deletion tears the machines down, then removes the finalizer', async () => {
    const members = pidsUnder(join(dir, 'clusters', 'web'));
    assert.ok(members.length > 0);
    objects.put('web', objects.objects.get('web')?.spec, { deleting: true });
    assert.ok(objects.objects.has('web'), 'the finalizer holds the object');
    await waitFor('the object gone', () => (objects.objects.has('web') ? undefined : true), 90_000);
    assert.deepEqual(members.filter(isRunning), [], 'no etcd of web left when the object went');
    assert.equal(await ctx.store.getControlPlane('web'), undefined);
  });

  after(async () => {
    await sync.stop(5_000);
    await controller.stop(5_000);
    await ctx.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
