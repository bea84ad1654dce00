import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { findKubernetesProgram } from '../../src/adapters/kubernetes/kubernetes-binaries.ts';
import type { CliEnv } from './cli.ts';

const run = promisify(execFile);

/** The Kubernetes version the tests run: the one README command 2 builds. */
export const TEST_KUBERNETES = '1.36.3';

/** The built kubectl, run with a kubeconfig; rejects with kubectl's stderr when it fails. */
export class Kubectl {
  constructor(readonly kubeconfig: string) {}

  async run(args: readonly string[], timeoutMs = 30_000): Promise<string> {
    try {
      const { stdout } = await run(findKubernetesProgram('kubectl', TEST_KUBERNETES), ['--kubeconfig', this.kubeconfig, `--request-timeout=${String(Math.ceil(timeoutMs / 1000))}s`, ...args], { timeout: timeoutMs + 5_000 });
      return stdout;
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? '';
      throw new Error(`kubectl ${args.join(' ')} failed: ${stderr.trim() || String(error)}`);
    }
  }

  async json<T>(args: readonly string[]): Promise<T> {
    return JSON.parse(await this.run([...args, '-o', 'json'])) as T;
  }
}

/** `fastplane kubeconfig NAME [--machine M]` written to a file in the env's state dir, with kubectl on it. */
export async function kubectlFor(env: CliEnv, cluster: string, machine?: string): Promise<Kubectl> {
  const printed = await env.run(['kubeconfig', cluster, ...(machine === undefined ? [] : ['--machine', machine])]);
  if (printed.code !== 0) throw new Error(`fastplane kubeconfig failed (${String(printed.code)}): ${printed.stderr}`);
  const file = join(env.stateDir, `${cluster}-${machine ?? 'endpoint'}.kubeconfig`);
  writeFileSync(file, printed.stdout, { mode: 0o600 });
  return new Kubectl(file);
}
