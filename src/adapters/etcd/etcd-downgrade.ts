import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { TlsFiles } from '../../ports/etcd-admin.ts';
import type { DowngradeStep, EtcdDowngrade, MemberVersions } from '../../ports/etcd-downgrade.ts';
import type { FindEtcdBinary } from './etcd-tools.ts';
import { getText } from '../host/http-probe.ts';

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

  async versions(endpoint: string, timeoutMs = CALL_TIMEOUT_MS): Promise<MemberVersions> {
    const { tls } = this.options;
    const url = `${endpoint}/version`;
    const answer = await getText(url, tls === undefined ? undefined : { kind: 'client', files: tls }, timeoutMs);
    try {
      const parsed = JSON.parse(answer.body) as { etcdserver?: string; etcdcluster?: string; storage?: string };
      if (parsed.etcdserver === undefined || parsed.etcdcluster === undefined) throw new Error(`unexpected answer: ${answer.body}`);
      return { server: parsed.etcdserver, cluster: parsed.etcdcluster, ...(parsed.storage === undefined ? {} : { storage: parsed.storage }) };
    } catch (error) {
      throw new Error(`${url}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }
}
