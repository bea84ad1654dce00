import { readFileSync } from 'node:fs';
import { request, type RequestOptions } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSecureContext, type SecureContext } from 'node:tls';
import { parse } from 'yaml';
import type { Kubectl } from './kubectl.ts';

// Traffic through a control plane's endpoint while a test changes the cluster under it, as etcd's
// robustness suite drives its clusters: a client library, not a program per request (a kubectl per
// write cost about 0.1 CPU s, most of a core at the rate below). Each request opens its own TLS
// connection, as each kubectl run does, so HAProxy routes every one afresh; the kubeconfig is read per
// request, so a client that fetches it again (a CA rotation) is followed.

const WRITE_EVERY_MS = 100;
const READ_EVERY_MS = 200;

interface Kubeconfig {
  clusters: { cluster: { server: string; 'certificate-authority-data'?: string } }[];
  users: { user: { 'client-certificate-data'?: string; 'client-key-data'?: string } }[];
}

/** The server, and the CA data and client certificate and key a kubeconfig embeds, as PEM. */
export function kubeconfigCredentials(text: string): { server: string; ca: string; cert: string; key: string } {
  const config = parse(text) as Kubeconfig;
  const pem = (data: string | undefined): string => Buffer.from(data ?? '', 'base64').toString('utf8');
  const cluster = config.clusters[0]?.cluster;
  const user = config.users[0]?.user;
  return { server: cluster?.server ?? '', ca: pem(cluster?.['certificate-authority-data']), cert: pem(user?.['client-certificate-data']), key: pem(user?.['client-key-data']) };
}

/**
 * The kubeconfig's server and a TLS context for its credentials, parsed again only when the file's
 * text changed: a context per request (parsing the key and certificates) cost more CPU than the request.
 */
const clients = new Map<string, { server: string; secureContext: SecureContext }>();

function clientFor(kubeconfigFile: string): { server: string; secureContext: SecureContext } {
  const text = readFileSync(kubeconfigFile, 'utf8');
  let client = clients.get(text);
  if (client === undefined) {
    const { server, ca, cert, key } = kubeconfigCredentials(text);
    client = { server, secureContext: createSecureContext({ ca, cert, key }) };
    clients.set(text, client);
  }
  return client;
}

/** One request to the apiserver the kubeconfig names; resolves with the status and body, rejects when no answer came. */
function call(kubeconfigFile: string, method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number): Promise<{ status: number; body: string }> {
  const { server, secureContext } = clientFor(kubeconfigFile);
  if (server === '') return Promise.reject(new Error(`${kubeconfigFile} names no server`));
  const payload = body === undefined ? undefined : JSON.stringify(body);
  // tls.connect takes the context; node's types list it only among tls.connect's options.
  const options: RequestOptions & { secureContext: SecureContext } = {
    method,
    agent: false,
    secureContext,
    timeout: timeoutMs,
    headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
  };
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, server),
      options,
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('error', reject);
        response.on('end', () => {
          resolve({ status: response.statusCode ?? 0, body: text });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} did not answer within ${String(timeoutMs)} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * Creates config maps through the endpoint, one every 100 ms, until stopped: which were acknowledged
 * (201), how many failed, and the longest time from a failed write to the next acknowledged one.
 */
export class EndpointWriter {
  readonly acked: string[] = [];
  failures = 0;
  longestOutageMs = 0;
  /** What the last failed write said. */
  lastError: string | undefined;
  private stopped = false;

  constructor(
    private readonly kubectl: Kubectl,
    private readonly namespace: string,
  ) {}

  stop(): void {
    this.stopped = true;
  }

  async run(): Promise<void> {
    let failingSince: number | undefined;
    // Bounded: a run that never stops still ends.
    for (let i = 0; i < 20_000 && !this.stopped; i++) {
      const name = `w-${String(i)}`;
      try {
        const answer = await call(this.kubectl.kubeconfig, 'POST', `/api/v1/namespaces/${this.namespace}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { i: String(i) } }, 10_000);
        if (answer.status !== 201) throw new Error(`create configmap ${name}: ${String(answer.status)} ${answer.body.slice(0, 300)}`);
        this.acked.push(name);
        if (failingSince !== undefined) this.longestOutageMs = Math.max(this.longestOutageMs, Date.now() - failingSince);
        failingSince = undefined;
      } catch (error) {
        this.failures++;
        this.lastError = error instanceof Error ? error.message : String(error);
        failingSince ??= Date.now();
      }
      await sleep(WRITE_EVERY_MS);
    }
    if (failingSince !== undefined) this.longestOutageMs = Math.max(this.longestOutageMs, Date.now() - failingSince);
  }
}

/**
 * Reads `/readyz` through the endpoint every 200 ms until stopped: how many answered ok, and when each
 * failed read was sent (a read sent to a hung apiserver fails only at its timeout, 5 s later).
 */
export class EndpointReader {
  ok = 0;
  readonly failures: number[] = [];
  private stopped = false;

  constructor(private readonly kubectl: Kubectl) {}

  stop(): void {
    this.stopped = true;
  }

  async run(): Promise<void> {
    for (let i = 0; i < 20_000 && !this.stopped; i++) {
      const sentAt = Date.now();
      try {
        const answer = await call(this.kubectl.kubeconfig, 'GET', '/readyz', undefined, 5_000);
        if (answer.status === 200 && answer.body.trim() === 'ok') this.ok++;
        else this.failures.push(sentAt);
      } catch {
        this.failures.push(sentAt);
      }
      await sleep(READ_EVERY_MS);
    }
  }
}
