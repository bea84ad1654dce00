import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { dirname, join } from 'node:path';
import type { TlsFiles } from '../../ports/etcd-admin.ts';
import type { DowngradeStep, EtcdDowngrade, MemberVersions } from '../../ports/etcd-downgrade.ts';
import type { FindEtcdBinary } from './etcd-tools.ts';

const CALL_TIMEOUT_MS = 10_000;

/** etcd's downgrade protocol through etcdctl of the members' current version, and `/version` over the client URL. */
export class EtcdctlDowngrade implements EtcdDowngrade {
  constructor(private readonly options: { findBinary: FindEtcdBinary; tls?: TlsFiles }) {}

  run(step: DowngradeStep, endpoints: readonly string[], targetMinor: string, toolVersion: string): Promise<string> {
    const etcdctl = join(dirname(this.options.findBinary(toolVersion)), 'etcdctl');
    if (!existsSync(etcdctl)) return Promise.reject(new Error(`etcdctl of etcd ${toolVersion} is not installed beside its etcd (${etcdctl})`));
    const { tls } = this.options;
    const args = [`--endpoints=${endpoints.join(',')}`, '--command-timeout=5s', ...(tls ? [`--cacert=${tls.caFile}`, `--cert=${tls.certFile}`, `--key=${tls.keyFile}`] : []), 'downgrade', step, ...(step === 'cancel' ? [] : [targetMinor])];
    // Only the variables etcdctl would read as flags are left out: the call says everything itself.
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('ETCD')));
    return new Promise((resolve, reject) => {
      execFile(etcdctl, args, { env, timeout: CALL_TIMEOUT_MS * 2 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`etcdctl downgrade ${step}${step === 'cancel' ? '' : ` ${targetMinor}`} failed: ${stderr.trim() || error.message}`));
        else resolve(stdout.trim());
      });
    });
  }

  versions(endpoint: string, timeoutMs = CALL_TIMEOUT_MS): Promise<MemberVersions> {
    const { tls } = this.options;
    const url = `${endpoint}/version`;
    return new Promise((resolve, reject) => {
      const onResponse = (res: import('node:http').IncomingMessage): void => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          try {
            const parsed = JSON.parse(body) as { etcdserver?: string; etcdcluster?: string; storage?: string };
            if (parsed.etcdserver === undefined || parsed.etcdcluster === undefined) throw new Error(`unexpected answer: ${body}`);
            resolve({ server: parsed.etcdserver, cluster: parsed.etcdcluster, ...(parsed.storage === undefined ? {} : { storage: parsed.storage }) });
          } catch (error) {
            reject(new Error(`${url}: ${error instanceof Error ? error.message : String(error)}`));
          }
        });
      };
      const request = url.startsWith('https:')
        ? httpsGet(url, { timeout: timeoutMs, ...(tls ? { ca: readFileSync(tls.caFile), cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) } : {}) }, onResponse)
        : httpGet(url, { timeout: timeoutMs }, onResponse);
      request.on('timeout', () => request.destroy(new Error(`${url}: no answer within ${String(timeoutMs)} ms`)));
      request.on('error', reject);
    });
  }
}
