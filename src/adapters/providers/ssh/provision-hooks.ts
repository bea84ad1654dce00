import { spawn } from 'node:child_process';
import { withoutEtcdVariables } from '../../host/processes.ts';

/**
 * Provisioning hooks: a command of the user's that creates (or deletes) one host, whatever that means
 * for them (a cloud API, a VM, a bare-metal pool). The request is JSON on stdin, the answer JSON on
 * stdout; a non-zero exit, a timeout or an answer that is not what we expect is a provisioning failure
 * carrying the tail of stderr, which is where such commands say what went wrong.
 */

export interface HookRequest {
  cluster: string;
  machine: string;
  failureDomain?: string;
  version: string;
  /** Delete only: the address the create hook answered. */
  address?: string;
}

export interface HookAnswer {
  address: string;
  port: number;
  user: string;
}

export class ProvisioningFailed extends Error {
  override readonly name = 'ProvisioningFailed';
}

const STDERR_TAIL = 800;

function tail(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > STDERR_TAIL ? `...${trimmed.slice(-STDERR_TAIL)}` : trimmed;
}

/** Runs `command` with sh, the request on stdin; resolves with stdout, or fails with ProvisioningFailed. */
export function runHook(kind: 'create' | 'delete', command: string, request: HookRequest, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', command], { stdio: ['pipe', 'pipe', 'pipe'], env: withoutEtcdVariables() });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.on('error', () => undefined); // a hook that never reads its stdin
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new ProvisioningFailed(`${kind} hook could not run: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) reject(new ProvisioningFailed(`${kind} hook timed out after ${String(timeoutMs)} ms: ${tail(stderr)}`));
      else if (code !== 0) reject(new ProvisioningFailed(`${kind} hook exited ${code === null ? `on ${String(signal)}` : String(code)}: ${tail(stderr)}`));
      else resolve(stdout);
    });
    child.stdin.end(JSON.stringify(request));
  });
}

/** The create hook's answer: `{ "address": ..., "port"?: 22, "user"?: "root" }`, the address an IPv4 literal or a host name. */
export async function runCreateHook(command: string, request: HookRequest, timeoutMs: number): Promise<HookAnswer> {
  const stdout = await runHook('create', command, request, timeoutMs);
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    throw new ProvisioningFailed(`create hook did not answer JSON on stdout: ${tail(stdout) || '(nothing)'}`);
  }
  // zod loads only when a hook answers: commands on clusters without hooks never pay for it. The
  // address is checked as an inventory's is: it becomes the member's URLs and its certificate.
  const [{ z }, { SshAddressSchema }] = await Promise.all([import('zod'), import('../../../api/ssh-provider.ts')]);
  const answerSchema = z.object({
    address: SshAddressSchema,
    port: z.number().int().min(1).max(65535).default(22),
    user: z.string().min(1).default('root'),
  });
  const answer = answerSchema.safeParse(parsed);
  if (!answer.success) {
    const problems = answer.error.issues.map((i) => `${i.path.map(String).join('.') || 'answer'}: ${i.message}`).join('; ');
    throw new ProvisioningFailed(`create hook answered ${tail(stdout)}: ${problems}`);
  }
  return answer.data;
}
