import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { TlsFiles } from '../../ports/etcd-admin.ts';

/**
 * GETs a component's health and version endpoints (etcd's /health, kube-apiserver's /readyz). node:https,
 * not fetch: fetch takes no client certificate and trusts no CA of its own.
 */

/** How to speak TLS to it: fastplane's client certificate, only the CA to check the server with, or no check at all. */
export type ProbeTls = { kind: 'client'; files: TlsFiles } | { kind: 'ca'; caFile: string } | { kind: 'unverified' };

export interface ProbeAnswer {
  status: number;
  body: string;
}

/**
 * TLS contexts by the content of their files. A controller probes every component each pass, and
 * building a context (parsing the key and certificates) costs more CPU than the probe itself; a file
 * rewritten with new content (a renewal, a CA rotation) gets a new context.
 */
const contexts = new Map<string, SecureContext>();
const CONTEXTS_KEPT = 32;

function contextFor(files: { ca?: Buffer; cert?: Buffer; key?: Buffer }): SecureContext {
  const id = [files.ca, files.cert, files.key].map((b) => b?.toString('latin1') ?? '').join('\0');
  let context = contexts.get(id);
  if (context === undefined) {
    context = createSecureContext(files);
    if (contexts.size >= CONTEXTS_KEPT) contexts.delete(contexts.keys().next().value ?? '');
    contexts.set(id, context);
  }
  return context;
}

async function tlsOptions(tls: ProbeTls | undefined): Promise<Record<string, unknown>> {
  if (tls === undefined) return {};
  // A self-signed serving certificate made in memory by the component itself: nothing to check it against.
  if (tls.kind === 'unverified') return { rejectUnauthorized: false, secureContext: contextFor({}) };
  const files = tls.kind === 'client' ? { ca: await readFile(tls.files.caFile), cert: await readFile(tls.files.certFile), key: await readFile(tls.files.keyFile) } : { ca: await readFile(tls.caFile) };
  // The files stay in the options too: the agent keeps connections apart by them.
  return { ...files, secureContext: contextFor(files) };
}

/** The status and body of a GET; rejected only when no answer came (refused, timed out, TLS failed). */
export async function getText(url: string, tls: ProbeTls | undefined, timeoutMs: number): Promise<ProbeAnswer> {
  const target = new URL(url);
  const options = await tlsOptions(tls);
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const call = request(target, { ...options, timeout: timeoutMs }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('error', reject);
      response.on('end', () => {
        resolve({ status: response.statusCode ?? 0, body });
      });
    });
    call.on('timeout', () => call.destroy(new Error(`${url} did not answer within ${String(timeoutMs)} ms`)));
    call.on('error', reject);
    call.end();
  });
}

/**
 * A JSON endpoint's answer, presenting fastplane's client certificate over https. An answer with an
 * error status still carries the component's reason in its body, so any JSON body is returned.
 */
export async function getJson(url: string, tls: TlsFiles | undefined, timeoutMs: number): Promise<unknown> {
  const answer = await getText(url, tls === undefined ? undefined : { kind: 'client', files: tls }, timeoutMs);
  try {
    return JSON.parse(answer.body);
  } catch {
    throw new Error(`${url} answered ${String(answer.status)} without JSON: ${answer.body.slice(0, 200)}`);
  }
}
