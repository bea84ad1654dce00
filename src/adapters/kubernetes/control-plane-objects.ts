import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  AuthorizationV1Api,
  CustomObjectsApi,
  EventsV1Api,
  EventsV1Event,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  V1ResourceAttributes,
  V1SelfSubjectAccessReview,
  V1SelfSubjectAccessReviewSpec,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { KIND } from '../../api/control-plane.ts';
import { CRD_GROUP, CRD_PLURAL, CRD_VERSION } from '../../api/crd.ts';
import { CONTROL_PLANE_PERMISSIONS, type Permission } from '../../api/rbac.ts';
import {
  ConflictError,
  ForbiddenError,
  type ControlPlaneObject,
  type ControlPlaneObjects,
  type ObjectEvent,
  type ObjectRef,
  type ObjectWatch,
  type StatusBody,
} from '../../ports/control-plane-objects.ts';
import { RelistingInformer } from './relisting-informer.ts';

/** Who writes the Events (events.k8s.io/v1 reportingController). */
export const REPORTING_CONTROLLER = 'fastplane.dev/controller';

/** Which objects: a namespaced custom resource with the status subresource. */
export interface ObjectResource {
  group: string;
  version: string;
  plural: string;
  kind: string;
  /** What the controller does with them, checked at start. */
  permissions: readonly Permission[];
}

/** fastplane's own ControlPlane objects. */
export const CONTROL_PLANE_RESOURCE: ObjectResource = { group: CRD_GROUP, version: CRD_VERSION, plural: CRD_PLURAL, kind: KIND, permissions: CONTROL_PLANE_PERMISSIONS };

export interface KubernetesObjectsOptions {
  kubeconfigFile: string;
  /** ControlPlane objects when undefined. */
  resource?: ObjectResource | undefined;
  /** Only this namespace's objects; all namespaces when undefined. */
  namespace: string | undefined;
  /** This replica, for the Events' reportingInstance. */
  instance: string;
  relistEveryMs: number;
}

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** Tries of one Event, 1, 2, 3 and 4 s apart: a watch cut or an API server restart is over by then. */
const EVENT_TRIES = 5;
const EVENT_RETRY_MS = 1_000;
/** client-node's requests have no timeout of their own: a call on a dead connection could wait forever. */
const CALL_TIMEOUT_MS = 30_000;

/** `call`, or an error once it took CALL_TIMEOUT_MS (the request itself is left to fail on its own). */
async function bounded<T>(what: string, call: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`${what}: no answer within ${String(CALL_TIMEOUT_MS / 1000)} s`));
    }, CALL_TIMEOUT_MS);
  });
  try {
    return await Promise.race([call, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

interface ControlPlaneResource extends KubernetesObject {
  spec?: unknown;
}

/** What a refused call says, in one line: `forbidden: patch controlplanes/status: <the API server's words>`. */
function apiError(error: unknown, what: string): Error {
  if (!(error instanceof ApiException)) return error instanceof Error ? error : new Error(String(error));
  const body: unknown = error.body;
  let said = '';
  try {
    const parsed: unknown = typeof body === 'string' ? JSON.parse(body) : body;
    if (typeof parsed === 'object' && parsed !== null && 'message' in parsed) said = String(parsed.message);
  } catch {
    said = typeof body === 'string' ? body : '';
  }
  const code = error.code;
  if (code === 403) return new ForbiddenError(`forbidden: ${what}: ${said}`);
  if (code === 409) return new ConflictError(`conflict: ${what}: ${said}`);
  return new Error(`${what}: HTTP ${String(code)}${said === '' ? '' : `: ${said}`}`);
}

function toObject(resource: ControlPlaneResource): ControlPlaneObject | undefined {
  const meta = resource.metadata;
  if (meta?.name === undefined || meta.namespace === undefined || meta.uid === undefined) return undefined;
  return {
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    generation: meta.generation ?? 0,
    resourceVersion: meta.resourceVersion ?? '',
    finalizers: meta.finalizers ?? [],
    annotations: meta.annotations ?? {},
    deleting: meta.deletionTimestamp !== undefined,
    spec: resource.spec,
  };
}

/** ControlPlane objects (fastplane.dev/v1alpha1), or another resource's, on an API server, through @kubernetes/client-node 1.x. */
export class KubernetesControlPlaneObjects implements ControlPlaneObjects {
  private readonly kubeconfig = new KubeConfig();
  private readonly resource: ObjectResource;
  private readonly custom: CustomObjectsApi;
  private readonly events: EventsV1Api;
  private readonly authorization: AuthorizationV1Api;

  constructor(private readonly options: KubernetesObjectsOptions) {
    this.resource = options.resource ?? CONTROL_PLANE_RESOURCE;
    this.kubeconfig.loadFromFile(options.kubeconfigFile);
    this.custom = this.kubeconfig.makeApiClient(CustomObjectsApi);
    this.events = this.kubeconfig.makeApiClient(EventsV1Api);
    this.authorization = this.kubeconfig.makeApiClient(AuthorizationV1Api);
  }

  /** The API server's address, for messages. */
  get server(): string {
    return this.kubeconfig.getCurrentCluster()?.server ?? 'the API server';
  }

  watch(onObject: (object: ControlPlaneObject) => void, onTrouble: (message: string) => void): ObjectWatch {
    const { namespace } = this.options;
    const { group, version, plural } = this.resource;
    const base = { group, version, plural };
    const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
      try {
        const listed: unknown = namespace === undefined ? await this.custom.listCustomObjectForAllNamespaces(base) : await this.custom.listNamespacedCustomObject({ ...base, namespace });
        return listed as KubernetesListObject<KubernetesObject>;
      } catch (error) {
        throw apiError(error, `list ${plural}`);
      }
    };
    return new RelistingInformer({
      kubeconfig: this.kubeconfig,
      path: `/apis/${group}/${version}${namespace === undefined ? '' : `/namespaces/${namespace}`}/${plural}`,
      list,
      relistEveryMs: this.options.relistEveryMs,
      onObject: (resource) => {
        const object = toObject(resource);
        if (object) onObject(object);
      },
      onTrouble,
    });
  }

  async setFinalizers(object: ControlPlaneObject, finalizers: string[]): Promise<void> {
    // A merge patch replaces the list whole; the resourceVersion in it makes the write conditional.
    const body = { metadata: { finalizers, resourceVersion: object.resourceVersion } };
    const { group, version, plural } = this.resource;
    try {
      await bounded('patch finalizers', this.custom.patchNamespacedCustomObject({ group, version, plural, namespace: object.namespace, name: object.name, body }, MERGE_PATCH));
    } catch (error) {
      throw apiError(error, `patch ${plural} (metadata.finalizers of ${object.namespace}/${object.name})`);
    }
  }

  async writeStatus(ref: ObjectRef, status: StatusBody): Promise<void> {
    const { group, version, plural } = this.resource;
    try {
      await bounded('patch status', this.custom.patchNamespacedCustomObjectStatus({ group, version, plural, namespace: ref.namespace, name: ref.name, body: { status } }, MERGE_PATCH));
    } catch (error) {
      throw apiError(error, `patch ${plural}/status (${ref.namespace}/${ref.name})`);
    }
  }

  async recordEvent(ref: ObjectRef, event: ObjectEvent): Promise<void> {
    const body = Object.assign(new EventsV1Event(), {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      // As client-go's recorder names them: the object's name and the time in hex, unique enough.
      metadata: { name: `${ref.name}.${(BigInt(event.at) * 1_000_000n + BigInt(Math.floor(Math.random() * 1_000_000))).toString(16)}`, namespace: ref.namespace },
      eventTime: new V1MicroTime(event.at),
      reportingController: REPORTING_CONTROLLER,
      reportingInstance: this.options.instance.slice(0, 128),
      action: event.action.slice(0, 128),
      reason: event.reason.slice(0, 128),
      note: event.note.slice(0, 1024),
      type: event.type,
      regarding: { apiVersion: `${this.resource.group}/${this.resource.version}`, kind: this.resource.kind, namespace: ref.namespace, name: ref.name, uid: ref.uid },
    });
    // Like client-go's recorder: a cut connection or a busy server is tried again, the same name each
    // time, so an Event a lost answer had written already is AlreadyExists, not a second Event.
    for (let attempt = 1; ; attempt++) {
      try {
        await bounded('create event', this.events.createNamespacedEvent({ namespace: ref.namespace, body }));
        return;
      } catch (error) {
        if (error instanceof ApiException && error.code === 409) return;
        const retriable = !(error instanceof ApiException) || error.code === 429 || error.code >= 500;
        if (!retriable || attempt >= EVENT_TRIES) throw apiError(error, 'create events.k8s.io events');
        await sleep(EVENT_RETRY_MS * attempt);
      }
    }
  }

  async missingPermissions(): Promise<string[]> {
    const missing: string[] = [];
    for (const permission of this.resource.permissions) {
      for (const verb of permission.verbs) {
        if (!(await this.allowed(permission, verb))) missing.push(`${verb} ${permission.resource}${permission.group === '' ? '' : ` (${permission.group})`}`);
      }
    }
    return missing;
  }

  private async allowed(permission: Permission, verb: string): Promise<boolean> {
    const [resource = '', subresource] = permission.resource.split('/');
    const resourceAttributes = Object.assign(new V1ResourceAttributes(), { group: permission.group, resource, verb }, subresource === undefined ? {} : { subresource }, this.options.namespace === undefined ? {} : { namespace: this.options.namespace });
    const body = Object.assign(new V1SelfSubjectAccessReview(), { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: Object.assign(new V1SelfSubjectAccessReviewSpec(), { resourceAttributes }) });
    const review = await bounded('create selfsubjectaccessreviews', this.authorization.createSelfSubjectAccessReview({ body })).catch((error: unknown) => {
      throw apiError(error, 'create selfsubjectaccessreviews');
    });
    return review.status?.allowed === true;
  }
}
