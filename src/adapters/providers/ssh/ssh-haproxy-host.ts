import type { HaproxyHost } from '../../endpoint/haproxy-host.ts';
import { askMasterOver } from '../../endpoint/haproxy-cli.ts';
import { withLock } from '../../state-files.ts';
import { writeRemoteFiles } from './remote-files.ts';
import { q } from './remote-scripts.ts';
import type { SshConnections, SshTarget } from './ssh-connections.ts';

/** Exit status of readText's script when the file does not exist. */
const ABSENT = 3;

/** True when /proc/$1's arguments include the marker exactly: the shell function the scripts below share. */
function oursFunction(marker: string): string {
  return `ours() { [ -r /proc/$1/cmdline ] && tr '\\0' '\\n' < /proc/$1/cmdline | grep -qxF -- ${q(marker)}; }`;
}

/**
 * The ssh provider's endpoint host as HAProxy's host (haproxy-host.ts): every file and process
 * operation a command over SSH, and the master CLI reached through a stream SSH opens to its unix
 * socket. Writers are serialized by a lock file on fastplane's side (`lockDir`), as fastplane's
 * processes sharing a state dir take turns.
 */
export function sshHaproxyHost(ssh: SshConnections, host: SshTarget, lockDir: string): HaproxyHost {
  const exec = async (script: string, what: string): Promise<string> => {
    const result = await ssh.exec(host, script);
    if (result.code !== 0) throw new Error(`${what} on ${host.address} failed: ${result.stderr.trim()}`);
    return result.stdout;
  };
  return {
    mkdir: async (dir) => {
      await exec(`mkdir -p ${q(dir)} && chmod 700 ${q(dir)}`, `creating ${dir}`);
    },
    readText: async (path) => {
      const result = await ssh.exec(host, `[ -e ${q(path)} ] || exit ${String(ABSENT)}; cat ${q(path)}`);
      if (result.code === ABSENT) return undefined;
      if (result.code !== 0) throw new Error(`reading ${path} on ${host.address} failed: ${result.stderr.trim()}`);
      return result.stdout;
    },
    writeText: (path, text, mode) => writeRemoteFiles(ssh, host, [{ path, mode, content: Buffer.from(text) }]),
    rename: async (from, to) => {
      await exec(`mv -f ${q(from)} ${q(to)}`, `renaming ${from}`);
    },
    remove: async (path) => {
      await exec(`rm -f ${q(path)}`, `removing ${path}`);
    },
    size: async (path) => Number((await exec(`stat -c %s ${q(path)} 2>/dev/null || echo 0`, `reading the size of ${path}`)).trim()) || 0,
    check: async (binary, configFile) => {
      const result = await ssh.exec(host, `${q(binary)} -c -f ${q(configFile)} 2>&1`);
      // 126 and 127: the shell found no program to run.
      return result.code === 0 ? { ok: true } : { ok: false, missing: result.code === 126 || result.code === 127, output: result.stdout + result.stderr };
    },
    spawn: async (binary, args, logFile) => {
      // $! is the program's PID: a background job is never a process group leader, so setsid does not fork.
      const out = await exec(`umask 077; setsid ${q(binary)} ${args.map(q).join(' ')} >>${q(logFile)} 2>&1 </dev/null & echo $!`, `starting ${binary}`);
      return Number(out.trim());
    },
    isOurs: async (pid, marker) => (await ssh.exec(host, `${oursFunction(marker)}\nours ${String(pid)}`)).code === 0,
    state: async (pid) => {
      const out = await exec(`cut -d' ' -f3 /proc/${String(pid)}/stat 2>/dev/null || true`, 'reading a process state');
      const state = out.trim();
      return state === '' ? 'gone' : state === 'Z' ? 'zombie' : 'running';
    },
    pidsUsing: async (marker) => {
      // The list is taken before the loop starts its own commands; the shell itself is left out.
      const out = await exec([oursFunction(marker), 'for p in /proc/[0-9]*; do p=${p#/proc/}; [ "$p" != $$ ] && ours "$p" && echo "$p"; done; true'].join('\n'), 'listing processes');
      return out.split('\n').filter((line) => /^\d+$/.test(line)).map(Number);
    },
    stop: async (pid, marker, graceMs) => {
      const ticks = Math.max(0, Math.ceil(graceMs / 100));
      await exec(
        [
          oursFunction(marker),
          `gone() { [ ! -e /proc/$1 ] || [ "$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null)" = Z ]; }`,
          `pid=${String(pid)}`,
          'ours "$pid" || exit 0',
          'kill -TERM "$pid" 2>/dev/null || true',
          `i=0; while ours "$pid" && ! gone "$pid" && [ $i -lt ${String(ticks)} ]; do sleep 0.1; i=$((i + 1)); done`,
          'ours "$pid" && ! gone "$pid" && kill -KILL "$pid" 2>/dev/null || true',
          'i=0; while ! gone "$pid" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done',
          'gone "$pid" || { echo "process $pid survived SIGKILL" >&2; exit 1; }',
        ].join('\n'),
        `stopping process ${String(pid)}`,
      );
    },
    signal: async (pid, name) => {
      await exec(`kill -${name.replace(/^SIG/, '')} ${String(pid)} 2>/dev/null || true`, `signalling process ${String(pid)}`);
    },
    ask: async (socket, command) => askMasterOver(await ssh.openSocket(host, socket), `${host.address}:${socket}`, command),
    lock: (lockFile, fn) => withLock(`${lockDir}/${lockFile.slice(lockFile.lastIndexOf('/') + 1)}`, fn),
  };
}
