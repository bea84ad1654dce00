import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
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

/** The status and body of a GET; rejected only when no answer came (refused, timed out, TLS failed). */
export async function getText(url: string, tls: ProbeTls | undefined, timeoutMs: number): Promise<ProbeAnswer> {
  const target = new URL(url);
  const options =
    tls === undefined ? {}
    : tls.kind === 'client' ? { ca: await readFile(tls.files.caFile), cert: await readFile(tls.files.certFile), key: await readFile(tls.files.keyFile) }
    : tls.kind === 'ca' ? { ca: await readFile(tls.caFile) }
    // A self-signed serving certificate made in memory by the component itself: nothing to check it against.
    : { rejectUnauthorized: false };
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
