import type { ControlPlaneStatus } from '../api/control-plane-status.ts';
import { InvalidInputError } from '../api/errors.ts';
import { applySpec, type SpecApplied } from '../app/spec.ts';
import { statusOf } from '../app/status.ts';
import type { Runtime } from '../app/runtime.ts';
import { destroyUnderLease } from '../app/teardown.ts';
import type { EventRecord } from '../domain/machine.ts';
import type { Clock } from '../ports/clock.ts';
import { ConflictError, ForbiddenError, type ControlPlaneObject, type ControlPlaneObjects, type ObjectWatch, type StatusBody } from '../ports/control-plane-objects.ts';
import { CONTROL_PLANE_KIND, type ObjectKind } from './object-kinds.ts';
import { objectStatus, sameStatus } from './object-status.ts';
import type { Timers } from './timers.ts';
import { WorkQueue, type HandleResult } from './work-queue.ts';

/**
 * ControlPlane objects of a management cluster into the record store, and their status and Events
 * back: the informer hands each object to a work queue keyed `namespace/name`; a pass adds the
 * finalizer, stores the spec through the same use case and checks as the CLI (the store's spec watch
 * then feeds the Controller's own queue), writes the status the `status` command computes when it
 * changed, and on deletion tears the machines down before it removes the finalizer. One ObjectSync
 * per kind of object (object-kinds.ts): a KubeadmControlPlane takes the same pass, converted.
 */

export const TEARDOWN_FINALIZER = 'fastplane.dev/teardown';
/** How often an object's status is looked at again (written only when it changed). */
const STATUS_EVERY_MS = 2_000;
/** How long a teardown waits for the Controller's pass in flight to give the cluster's lease up. */
const TEARDOWN_WAIT_MS = 30_000;

export interface ObjectSyncOptions {
  runtime: Runtime;
  objects: ControlPlaneObjects;
  clock: Clock;
  timers: Timers;
  /** The API server refused for lack of permission: the controller cannot do its work. */
  onForbidden: (error: ForbiddenError) => void;
  /** Which objects and how they map to a ControlPlane: ControlPlane objects when undefined. */
  kind?: ObjectKind;
  /**
   * Control plane name to the object that owns it (`Kind namespace/name`), shared by the syncs of
   * every kind: names are one namespace in the store.
   */
  owners?: Map<string, string>;
}

interface ObjectState {
  object: ControlPlaneObject;
  /** The metadata.generation whose spec was stored or refused. */
  generation?: number;
  invalid?: readonly string[] | undefined;
  written?: ControlPlaneStatus;
  /** What was written last, in the kind's shape: written again only when it changes. */
  writtenBody?: StatusBody;
}

export class ObjectSync {
  private readonly states = new Map<string, ObjectState>();
  private readonly owners: Map<string, string>;
  private readonly kind: ObjectKind;
  private readonly queue: WorkQueue;
  private watch: ObjectWatch | undefined;

  constructor(private readonly options: ObjectSyncOptions) {
    this.kind = options.kind ?? CONTROL_PLANE_KIND;
    this.owners = options.owners ?? new Map<string, string>();
    this.queue = new WorkQueue(
      {
        maxConcurrent: 4,
        timers: options.timers,
        handle: (key) => this.handle(key),
        onError: (key, error) => {
          if (error instanceof ForbiddenError) options.onForbidden(error);
          else if (!(error instanceof ConflictError)) options.runtime.log.warn({ object: key, err: String(error) }, `${this.kind.kind} ${key}: ${error instanceof Error ? error.message : String(error)}`);
        },
      },
      () => options.clock.now(),
    );
  }

  start(): void {
    this.watch = this.options.objects.watch(
      (object) => {
        if (!this.kind.manages(object)) return;
        const key = `${object.namespace}/${object.name}`;
        const st = this.states.get(key);
        if (st && st.object.uid === object.uid) st.object = object;
        else this.states.set(key, { object });
        this.queue.add(key);
      },
      (message) => {
        this.options.runtime.log.warn({}, message);
      },
    );
  }

  async stop(boundMs: number): Promise<void> {
    this.watch?.close();
    await this.queue.shutdown(boundMs);
  }

  /** A recorded event of a control plane (the Controller's `notify`): an Event on its object. */
  onEvent(event: EventRecord): void {
    const owner = this.owners.get(event.cluster);
    const key = owner?.startsWith(`${this.kind.kind} `) === true ? owner.slice(this.kind.kind.length + 1) : undefined;
    const object = key === undefined ? undefined : this.states.get(key)?.object;
    if (key === undefined || object === undefined) return;
    const action = event.action ?? event.reason;
    const type = event.type === 'Warning' || event.outcome === 'Failed' || event.outcome === 'Refused' ? 'Warning' : 'Normal';
    this.options.objects.recordEvent(object, { type, reason: action, action, note: event.message, at: event.at }).catch((error: unknown) => {
      if (error instanceof ForbiddenError) this.options.onForbidden(error);
      else this.options.runtime.log.warn({ object: key, err: String(error) }, `Event ${action} on ${this.kind.kind} ${key} not recorded: ${error instanceof Error ? error.message : String(error)}`);
    });
    this.queue.add(key);
  }

  private async handle(key: string): Promise<HandleResult> {
    const st = this.states.get(key);
    if (!st) return {};
    const { object } = st;
    const { objects, runtime } = this.options;
    if (object.deleting) return this.finalize(key, st);
    if (!object.finalizers.includes(TEARDOWN_FINALIZER)) {
      // The watch brings the object back with its finalizer, and that is handled next.
      await objects.setFinalizers(object, [...object.finalizers, TEARDOWN_FINALIZER]);
      return {};
    }
    const owner = this.owners.get(object.name);
    const self = `${this.kind.kind} ${key}`;
    if (owner !== undefined && owner !== self) {
      st.invalid = [`metadata.name: the control plane ${object.name} belongs to the ${owner}; names are unique across namespaces and kinds`];
      await this.writeStatus(st, false);
      return {};
    }
    this.owners.set(object.name, self);
    if (st.generation !== object.generation || st.invalid !== undefined) {
      const applied = await this.apply(key, object, st.generation !== object.generation);
      if (applied.applied && applied.changed) runtime.log.info({ object: key, generation: applied.generation }, `${self} generation ${String(object.generation)} stored as generation ${String(applied.generation)}`);
      if (!applied.applied && st.invalid === undefined) runtime.log.warn({ object: key, problems: applied.problems }, `${self}: invalid spec: ${applied.problems.join('; ')}`);
      st.generation = object.generation;
      st.invalid = applied.applied ? undefined : applied.problems;
    }
    await this.writeStatus(st, true);
    return { requeueAfterMs: STATUS_EVERY_MS };
  }

  /** The object's spec, converted by its kind, stored through the CLI's checks; the conversion's notes logged once per generation. */
  private async apply(key: string, object: ControlPlaneObject, newGeneration: boolean): Promise<SpecApplied> {
    const { runtime, clock } = this.options;
    let spec: unknown;
    try {
      const converted = this.kind.specOf(object);
      if (newGeneration) for (const note of converted.notes) runtime.log.info({ object: key }, `${this.kind.kind} ${key}: ${note}`);
      spec = converted.spec;
    } catch (error) {
      if (error instanceof InvalidInputError) return { applied: false, problems: error.problems };
      throw error;
    }
    return applySpec(runtime, object.name, spec, clock.now());
  }

  /** Status as the status command shows it, in the kind's shape, written only when it changed. */
  private async writeStatus(st: ObjectState, owned: boolean, deleting?: string): Promise<void> {
    const { runtime, objects, clock } = this.options;
    const record = owned ? await runtime.store.getControlPlane(st.object.name) : undefined;
    const document = record === undefined ? undefined : await statusOf(runtime, st.object.name);
    const status = objectStatus({ generation: st.generation ?? st.object.generation, document, invalid: st.invalid, deleting, previous: st.written?.conditions, now: clock.now() });
    const body = this.kind.statusBody(status, document);
    if (sameStatus(st.writtenBody, body)) return;
    await objects.writeStatus(st.object, body);
    st.written = status;
    st.writtenBody = body;
  }

  /** `kubectl delete`: the machines torn down under the cluster's lease, and only then the finalizer removed. */
  private async finalize(key: string, st: ObjectState): Promise<HandleResult> {
    const { object } = st;
    const { objects, runtime } = this.options;
    if (!object.finalizers.includes(TEARDOWN_FINALIZER)) return {};
    const owned = this.owners.get(object.name) === `${this.kind.kind} ${key}`;
    const record = owned ? await runtime.store.getControlPlane(object.name) : undefined;
    if (record !== undefined) {
      const machines = (await runtime.store.listMachines(object.name)).length;
      await this.writeStatus(st, true, `tearing down ${String(machines)} machines`);
      const done = await destroyUnderLease(runtime, record.manifest, { waitMs: TEARDOWN_WAIT_MS, force: false }, (text) => {
        runtime.log.info({ object: key }, text);
      });
      if (!done) return { requeueAfterMs: STATUS_EVERY_MS };
      runtime.log.info({ object: key }, `${this.kind.kind} ${key}: every machine of ${object.name} torn down`);
    }
    await objects.setFinalizers(object, object.finalizers.filter((f) => f !== TEARDOWN_FINALIZER));
    if (owned) this.owners.delete(object.name);
    this.states.delete(key);
    return {};
  }
}
