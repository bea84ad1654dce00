import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { castGrpcError, Etcd3, type ILeaseKeepAliveResponse, type IOptions } from 'etcd3';
import { noop } from 'cockatiel';
import { classifyEtcdError, type TlsCredentials } from '../etcd/etcd3-admin.ts';

/**
 * The etcd connection of the etcd-backed StateStore: one client per endpoint, tried in order, and the
 * key layout of the records.
 *
 * etcd3's own fault handling is off (it retries and opens circuit breakers); here a read moves on to
 * the next endpoint after any failure, a write only after a failure that proves the request never
 * reached etcd (connection refused, no connection made). A write that timed out or lost its
 * connection may have been applied, so it is never sent again blindly: the caller sees the error, and
 * the stores' writes re-read before they decide anything.
 */

/** Every endpoint failed to answer: etcd is down or unreachable from here. */
export class EtcdStoreUnreachableError extends Error {
  override readonly name = 'EtcdStoreUnreachableError';
}

/** PEM files as etcdctl takes them (--cacert, --cert, --key); the CA defaults to the system's roots. */
export interface EtcdTlsFiles {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

export interface EtcdStoreConnection {
  /** Client URLs, e.g. https://127.0.0.1:2379. */
  endpoints: readonly string[];
  /** TLS files; with a client certificate and key, mutual TLS. Without any, the endpoints' scheme decides. */
  tls?: EtcdTlsFiles;
  /** Deadline of every unary call, in ms (default 5000). */
  callTimeoutMs?: number;
}

export function etcdClientOptions(hosts: string[], credentials: TlsCredentials | undefined, callTimeoutMs: number): IOptions {
  return {
    hosts,
    ...(credentials === undefined ? {} : { credentials }),
    faultHandling: { global: noop, host: () => noop },
    grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 1000 },
    // Each unary call gets its own deadline; a stream (the spec watch) lives until it is cancelled.
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
  };
}

function credentialsOf(tls: EtcdTlsFiles | undefined): TlsCredentials | undefined {
  if (tls === undefined || (tls.caFile ?? tls.certFile ?? tls.keyFile) === undefined) return undefined;
  return {
    rootCertificate: tls.caFile === undefined ? Buffer.from(rootCertificates.join('\n')) : readFileSync(tls.caFile),
    ...(tls.certFile === undefined ? {} : { certChain: readFileSync(tls.certFile) }),
    ...(tls.keyFile === undefined ? {} : { privateKey: readFileSync(tls.keyFile) }),
  };
}

function neverReachedEtcd(error: unknown): boolean {
  const classified = classifyEtcdError(error);
  const text = classified.message.toLowerCase();
  return classified.kind === 'Unreachable' && (text.includes('econnrefused') || text.includes('no connection established'));
}

export class EtcdEndpoints {
  private readonly clients: Etcd3[];
  /** The endpoint that answered last goes first, so a dead one costs one failure, not one per call. */
  private preferred = 0;
  readonly endpoints: readonly string[];
  readonly credentials: TlsCredentials | undefined;
  readonly callTimeoutMs: number;

  constructor(connection: EtcdStoreConnection) {
    if (connection.endpoints.length === 0) throw new Error('etcd store: no endpoints given');
    this.endpoints = [...connection.endpoints];
    this.credentials = credentialsOf(connection.tls);
    this.callTimeoutMs = connection.callTimeoutMs ?? 5000;
    this.clients = this.endpoints.map((endpoint) => new Etcd3(etcdClientOptions([endpoint], this.credentials, this.callTimeoutMs)));
  }

  /** A client over every endpoint, for streams that etcd3 reconnects by itself (the caller closes it). */
  streamClient(): Etcd3 {
    return new Etcd3(etcdClientOptions([...this.endpoints], this.credentials, this.callTimeoutMs));
  }

  read<T>(run: (client: Etcd3) => Promise<T>): Promise<T> {
    return this.inTurn(run, () => true);
  }

  write<T>(run: (client: Etcd3) => Promise<T>): Promise<T> {
    return this.inTurn(run, neverReachedEtcd);
  }

  /**
   * One keep-alive of an etcd lease: its TTL runs again from when etcd receives it. False when the
   * lease is gone (etcd answers TTL 0: expired or revoked). Sent again to the next endpoint after any
   * failure, as a read is: a second keep-alive only restarts the TTL once more.
   */
  keepAlive(id: string): Promise<boolean> {
    return this.inTurn(async (client) => {
      // A stream has no deadline by default (etcdClientOptions): this one gets the unary calls' own.
      const stream = await client.leaseClient.leaseKeepAlive({ deadline: Date.now() + this.callTimeoutMs });
      try {
        const answer = await new Promise<ILeaseKeepAliveResponse>((resolve, reject) => {
          stream.on('data', resolve);
          stream.on('error', (error) => {
            reject(castGrpcError(error));
          });
          stream.on('end', () => {
            reject(new Error('the keep-alive stream ended without an answer'));
          });
          stream.write({ ID: id });
        });
        return answer.TTL !== '0';
      } finally {
        // Half-closed, not cancelled: etcd3 counts a cancelled stream's error against the endpoint.
        stream.end();
      }
    }, () => true);
  }

  private async inTurn<T>(run: (client: Etcd3) => Promise<T>, moveOn: (error: unknown) => boolean): Promise<T> {
    const failures: string[] = [];
    for (let i = 0; i < this.clients.length; i++) {
      const index = (this.preferred + i) % this.clients.length;
      const client = this.clients[index];
      if (client === undefined) continue;
      try {
        const result = await run(client);
        this.preferred = index;
        return result;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        if (classifyEtcdError(error).kind !== 'Unreachable' && classifyEtcdError(error).kind !== 'Timeout') {
          throw new Error(`etcd store (${this.endpoints[index] ?? '?'}): ${message}`, { cause: error });
        }
        if (!moveOn(error)) {
          throw new EtcdStoreUnreachableError(`etcd store at ${this.endpoints[index] ?? '?'} did not answer (${message}); the write may or may not have been applied`, { cause: error });
        }
        failures.push(`${this.endpoints[index] ?? '?'}: ${message}`);
      }
    }
    throw new EtcdStoreUnreachableError(`etcd store unreachable at ${this.endpoints.join(', ')} (${failures.join('; ')})`);
  }

  close(): void {
    for (const client of this.clients) client.close();
  }
}

/** The end of the key range that holds every key starting with `prefix`. */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    const byte = end[i] ?? 0;
    if (byte < 0xff) {
      end[i] = byte + 1;
      return end.subarray(0, i + 1);
    }
  }
  // Only 0xff bytes: the range runs to the end of the key space.
  return Buffer.from([0]);
}

/** Names become single key segments: a '/' in a pool or key cannot reach into another's range. */
const segment = (name: string): string => encodeURIComponent(name);

/** Where each record lives, under a prefix (default `/fastplane/`). Values are the records' JSON. */
export class EtcdKeys {
  constructor(readonly prefix: string) {}

  controlPlanes(): string {
    return `${this.prefix}control-planes/`;
  }
  controlPlane(name: string): string {
    return `${this.controlPlanes()}${segment(name)}`;
  }
  /** The cluster name of a control-plane key. */
  clusterOf(key: string): string {
    return decodeURIComponent(key.slice(this.controlPlanes().length));
  }
  machines(cluster: string): string {
    return `${this.prefix}machines/${segment(cluster)}/`;
  }
  machine(cluster: string, name: string): string {
    return `${this.machines(cluster)}${segment(name)}`;
  }
  events(cluster: string): string {
    return `${this.prefix}events/${segment(cluster)}/`;
  }
  /** Zero-padded, so that key order is sequence order. */
  event(cluster: string, seq: number): string {
    return `${this.events(cluster)}${String(seq).padStart(16, '0')}`;
  }
  seqOf(key: string): number {
    return Number(key.slice(key.lastIndexOf('/') + 1));
  }
  /** The cluster's last event sequence number; kept when the cluster is deleted, so none repeats. */
  eventSeq(cluster: string): string {
    return `${this.prefix}event-seq/${segment(cluster)}`;
  }
  lease(cluster: string): string {
    return `${this.prefix}leases/${segment(cluster)}`;
  }
  claims(pool: string): string {
    return `${this.prefix}claims/${segment(pool)}/`;
  }
  claim(pool: string, key: string): string {
    return `${this.claims(pool)}${segment(key)}`;
  }
  documents(scope: string): string {
    return `${this.prefix}documents/${segment(scope)}/`;
  }
  document(scope: string, key: string): string {
    return `${this.documents(scope)}${segment(key)}`;
  }
}
