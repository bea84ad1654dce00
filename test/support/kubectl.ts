import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { findKubernetesProgram } from '../../src/adapters/kubernetes/kubernetes-binaries.ts';
import type { CliEnv, CliRun } from './cli.ts';

const run = promisify(execFile);

/** The Kubernetes version the tests run: the one README command 2 builds. */
export const TEST_KUBERNETES = '1.36.3';
/** The next minor's patch the rollout test rolls to, also built by README command 2. */
export const TEST_KUBERNETES_NEXT = '1.37.2';

/** What `kubectl get ... -o json` lists, as far as the tests read it: the objects' names. */
export interface Named {
  items: { metadata: { name: string } }[];
}

/** The built kubectl, run with a kubeconfig; rejects with kubectl's stderr when it fails. */
export class Kubectl {
  constructor(readonly kubeconfig: string) {}

  async run(args: readonly string[], timeoutMs = 30_000): Promise<string> {
    try {
      const { stdout } = await run(findKubernetesProgram('kubectl', TEST_KUBERNETES), ['--kubeconfig', this.kubeconfig, `--request-timeout=${String(Math.ceil(timeoutMs / 1000))}s`, ...args], { timeout: timeoutMs + 5_000 });
      return stdout;
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? '';
      throw new Error(`kubectl ${args.join(' ')} failed: ${stderr.trim() || String(error)}`, { cause: error });
    }
  }

  async json<T>(args: readonly string[]): Promise<T> {
    return JSON.parse(await this.run([...args, '-o', 'json'])) as T;
  }
}

/**
 * `fastplane kubeconfig NAME [--machine M]` written to a file in the env's state dir, with kubectl on
 * it; `cli` runs fastplane (with a row's store flags, say).
 */
export async function kubectlFor(env: CliEnv, cluster: string, machine?: string, cli: (args: string[]) => Promise<CliRun> = (args) => env.run(args)): Promise<Kubectl> {
  const printed = await cli(['kubeconfig', cluster, ...(machine === undefined ? [] : ['--machine', machine])]);
  if (printed.code !== 0) throw new Error(`fastplane kubeconfig failed (${String(printed.code)}): ${printed.stderr}`);
  const file = join(env.stateDir, `${cluster}-${machine ?? 'endpoint'}.kubeconfig`);
  writeFileSync(file, printed.stdout, { mode: 0o600 });
  return new Kubectl(file);
}

/** The PID the local provider recorded for a machine's etcd (`machine`) or one of its Kubernetes components. */
export function recordedPid(env: CliEnv, cluster: string, machine: string, what: 'machine' | 'kube-apiserver'): number {
  const file = join(env.stateDir, 'clusters', cluster, 'machines', machine, `${what}.json`);
  const pid = (JSON.parse(readFileSync(file, 'utf8')) as { pid?: number }).pid;
  if (pid === undefined) throw new Error(`${file} records no PID`);
  return pid;
}
