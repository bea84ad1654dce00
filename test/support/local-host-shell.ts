import { execFile } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import type { HostShell } from '../../src/adapters/providers/ssh/remote-files.ts';
import type { ExecResult } from '../../src/adapters/providers/ssh/ssh-connections.ts';

/**
 * A host whose shell is this machine's (a scratch directory stands for the host's disk), so the ssh
 * provider's own scripts run for real; it records every upload's destination.
 */
export function localHostShell(): HostShell & { uploads: string[] } {
  const uploads: string[] = [];
  return {
    uploads,
    exec: (_target, command) =>
      new Promise<ExecResult>((resolve) => {
        execFile('sh', ['-c', command], (error, stdout, stderr) => {
          resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
        });
      }),
    upload: (_target, from, to) => {
      uploads.push(to);
      copyFileSync(from, to);
      return Promise.resolve();
    },
  };
}
