import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { TlsFiles } from '../../ports/etcd-admin.ts';

/**
 * GETs a component's JSON endpoint (etcd's /health and /version), presenting fastplane's client
 * certificate over https. node:https, not fetch: fetch takes no client certificate. An answer with an
 * error status still carries the component's reason in its body, so any JSON body is returned.
 */
export async function getJson(url: string, tls: TlsFiles | undefined, timeoutMs: number): Promise<unknown> {
  const target = new URL(url);
  const credentials = tls === undefined ? {} : { ca: await readFile(tls.caFile), cert: await readFile(tls.certFile), key: await readFile(tls.keyFile) };
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const call = request(target, { ...credentials, timeout: timeoutMs }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('error', reject);
      response.on('end', () => {
        try {
          resolve(JSON.parse(body));
        } catch {
          reject(new Error(`${url} answered ${String(response.statusCode)} without JSON: ${body.slice(0, 200)}`));
        }
      });
    });
    call.on('timeout', () => call.destroy(new Error(`${url} did not answer within ${String(timeoutMs)} ms`)));
    call.on('error', reject);
    call.end();
  });
}
