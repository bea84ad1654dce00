import { createHash } from 'node:crypto';
import { ApiException, CoordinationV1Api, CoreV1Api, KubeConfig, type V1DeleteOptions, type V1Namespace } from '@kubernetes/client-node';
import { InvalidInputError } from '../../api/errors.ts';

/**
 * The Kubernetes API as the kubernetes store uses it: one kubeconfig, one namespace, object names
 * derived from what they hold, and the API's answers turned into what the store decides on (absent,
 * conflict) or into errors that say what did not work.
 *
 * Every write the store makes is a read, then a replace carrying the `resourceVersion` it read: the
 * API server refuses it with 409 Conflict when the object changed meanwhile (optimistic concurrency,
 * Kubernetes API concepts, "Resource versions"), and the store reads again.
 */

export const DEFAULT_NAMESPACE = 'fastplane-system';

/** Labels every object of the store carries: `kubectl get cm,secret,lease -l app.kubernetes.io/managed-by=fastplane`. */
export const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'fastplane' } as const;
/** What an object holds: `cluster` (the records of one control plane), `claims`, `documents`, `fences`. */
export const RECORD_LABEL = 'fastplane.dev/record';
/** The unabbreviated name (cluster, pool or scope) an object was named after. */
export const NAME_ANNOTATION = 'fastplane.dev/name';

/**
 * The JSON shape of one of the client's models. They are classes, but the API server takes plain
 * objects of their fields: what the store builds.
 */
export type Plain<T> = T extends Date ? T : T extends readonly (infer U)[] ? Plain<U>[] : T extends object ? { [K in keyof T]: Plain<T[K]> } : T;

/** The API server says why, in a Status body; the message is its `message`, or the HTTP code. */
function statusMessage(error: ApiException<unknown>): string {
  const body = typeof error.body === 'string' ? safeJson(error.body) : error.body;
  const message: unknown = typeof body === 'object' && body !== null && 'message' in body ? body.message : undefined;
  return typeof message === 'string' ? message : `HTTP ${String(error.code)}`;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The socket-level failures that mean the API server did not answer at all. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET', 'EAI_AGAIN']);

function errorCode(error: unknown): string | undefined {
  for (let cause: unknown = error; typeof cause === 'object' && cause !== null; cause = (cause as { cause?: unknown }).cause) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

export const isStatus = (error: unknown, code: number): boolean => error instanceof ApiException && error.code === code;

/** A delete that applies only to the object as read. */
export function deleteIfUnchanged(resourceVersion: string | undefined): Plain<V1DeleteOptions> {
  return { preconditions: { resourceVersion: resourceVersion ?? '' } };
}

/** A Kubernetes object name (a DNS subdomain, at most 253) for any text: readable part, then a hash that keeps names apart. */
export function objectName(prefix: string, text: string): string {
  const readable = text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 180);
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 10);
  return `${prefix}-${readable === '' ? '' : `${readable}-`}${hash}`;
}

/**
 * A data key of a ConfigMap or Secret (letters, digits, `-`, `_`, `.`) for any text: `_` and every other
 * character become `_` and their UTF-8 bytes in hex, as does a leading `.` (`..` keys are refused).
 */
export function dataKey(text: string): string {
  const escape = (char: string): string => Array.from(Buffer.from(char), (byte) => `_${byte.toString(16).padStart(2, '0')}`).join('');
  return text.replace(/^\.|[^A-Za-z0-9.-]/gu, escape);
}

export function fromDataKey(key: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < key.length; i++) {
    if (key[i] === '_') {
      bytes.push(Number.parseInt(key.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(key.charCodeAt(i));
  }
  return Buffer.from(bytes).toString('utf8');
}

export interface KubernetesStoreConnection {
  /** The kubeconfig file; its current context is the one used. */
  kubeconfig: string;
  /** Where every object lives (default fastplane-system): created when missing. */
  namespace?: string;
}

/** The API clients of one kubeconfig, and the namespace, made sure of before the first call. */
export class KubernetesApi {
  readonly config = new KubeConfig();
  readonly core: CoreV1Api;
  readonly coordination: CoordinationV1Api;
  readonly namespace: string;
  readonly server: string;
  private ready: Promise<void> | undefined;

  constructor(private readonly connection: KubernetesStoreConnection) {
    try {
      this.config.loadFromFile(connection.kubeconfig);
    } catch (error) {
      throw new InvalidInputError([`--kubeconfig: cannot read ${connection.kubeconfig}: ${error instanceof Error ? error.message : String(error)}`]);
    }
    const server = this.config.getCurrentCluster()?.server;
    if (server === undefined) throw new InvalidInputError([`--kubeconfig: ${connection.kubeconfig} names no cluster in its current context`]);
    this.server = server;
    this.namespace = connection.namespace ?? DEFAULT_NAMESPACE;
    this.core = this.config.makeApiClient(CoreV1Api);
    this.coordination = this.config.makeApiClient(CoordinationV1Api);
  }

  /** Runs one API call once the namespace is there; `what` names the call in errors. */
  async call<T>(what: string, request: () => Promise<T>): Promise<T> {
    this.ready ??= this.ensureNamespace().catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    });
    await this.ready;
    try {
      return await request();
    } catch (error) {
      throw this.explain(what, error);
    }
  }

  /** The object, or undefined when there is none (404). */
  async read<T>(what: string, request: () => Promise<T>): Promise<T | undefined> {
    try {
      return await this.call(what, request);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** A write under a resourceVersion precondition (or a create): false when another write came first (409). */
  async write(what: string, request: () => Promise<unknown>): Promise<boolean> {
    try {
      await this.call(what, request);
      return true;
    } catch (error) {
      // 409: the object changed since it was read (or was created meanwhile); 404: it was deleted meanwhile.
      if (isStatus(error, 409) || isStatus(error, 404)) return false;
      throw error;
    }
  }

  /** Keeps ApiExceptions (the caller decides on 404 and 409); anything else becomes an error that names the server. */
  private explain(what: string, error: unknown): Error {
    if (error instanceof ApiException) {
      if (error.code === 404 || error.code === 409) return error;
      return new Error(`kubernetes store: ${what} in namespace ${this.namespace}: ${statusMessage(error)}`, { cause: error });
    }
    const code = errorCode(error);
    if (code !== undefined && UNREACHABLE.has(code)) return new KubernetesStoreUnreachableError(`kubernetes store unreachable at ${this.server} (${code})`, { cause: error });
    return error instanceof Error ? error : new Error(String(error));
  }

  /** The namespace exists, or is created; not being allowed to look is no proof it is missing. */
  private async ensureNamespace(): Promise<void> {
    const name = this.namespace;
    const where = `--kubeconfig ${this.connection.kubeconfig}`;
    try {
      await this.core.readNamespace({ name });
      return;
    } catch (error) {
      if (isStatus(error, 403)) return;
      if (!isStatus(error, 404)) throw this.firstCallError(where, error);
    }
    try {
      const body: Plain<V1Namespace> = { metadata: { name, labels: { ...MANAGED_BY } } };
      await this.core.createNamespace({ body });
    } catch (error) {
      if (isStatus(error, 409)) return;
      if (isStatus(error, 403)) throw new InvalidInputError([`--store-namespace: namespace ${name} does not exist and the user of ${where} may not create it: create it, or grant create on namespaces`]);
      throw this.firstCallError(where, error);
    }
  }

  /** The first call decides whether the kubeconfig is usable at all: if not, it is bad input. */
  private firstCallError(where: string, error: unknown): Error {
    const explained = this.explain(`read namespace ${this.namespace}`, error);
    if (explained instanceof KubernetesStoreUnreachableError) return new InvalidInputError([`${where}: ${explained.message}`]);
    if (isStatus(error, 401)) return new InvalidInputError([`${where}: the API server at ${this.server} refused the credentials (401 Unauthorized)`]);
    return explained;
  }
}

/** The API server did not answer (after the first call, which reports it as bad input). */
export class KubernetesStoreUnreachableError extends Error {
  override readonly name = 'KubernetesStoreUnreachableError';
}
