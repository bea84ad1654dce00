/**
 * The shell commands the ssh provider runs on a host, as text: POSIX sh and coreutils only (and
 * util-linux's flock where the host has it), so any Linux host will do. Every path is quoted; a
 * process is recognised by its marker (a member's data dir, a Kubernetes component's certificate or
 * kubeconfig) in the command line of the PID in its pidfile, so a reused PID is never taken for ours.
 */

/** Single-quotes a word for sh. */
export function q(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** A process fastplane runs on a host: its folder, pidfile, start time, log, and the argument only it has. */
export interface RemoteProcess {
  dir: string;
  marker: string;
  pidFile: string;
  startedAtFile: string;
  logFile: string;
}

export interface RemoteMember extends RemoteProcess {
  dataDir: string;
  pkiDir: string;
}

export function remoteMember(baseDir: string, cluster: string, name: string): RemoteMember {
  const dir = `${baseDir}/clusters/${cluster}/${name}`;
  const dataDir = `${dir}/data`;
  return { dir, dataDir, marker: dataDir, pidFile: `${dir}/etcd.pid`, startedAtFile: `${dir}/started-at`, logFile: `${dir}/etcd.log`, pkiDir: `${dir}/pki` };
}

/** Exit status of a fenced script refused by the host: a newer lease holder acted on the cluster there. */
export const FENCED = 75;

/**
 * Where a host keeps the highest lease fence any call on the cluster carried: outside the cluster's
 * folder, whose entries are its machines, and kept when they are wiped.
 */
export function fenceFile(baseDir: string, cluster: string): string {
  return `${baseDir}/fences/${cluster}`;
}

/**
 * The lines a destructive script starts with: under the cluster's fence lock (flock, held to the
 * script's end so the act runs before any newer holder's), refuse a fence lower than the host's with
 * FENCED and `fence=<the host's>` on stderr, else record it. No fence: nothing checked.
 */
export function fenceLines(file: string, fence: number | undefined): string[] {
  if (fence === undefined) return [];
  const dir = file.slice(0, file.lastIndexOf('/'));
  return [
    `mkdir -p ${q(dir)}`,
    `exec 9>>${q(`${file}.lock`)}`,
    'if command -v flock >/dev/null 2>&1; then flock 9; fi',
    `seen=$(cat ${q(file)} 2>/dev/null || true)`,
    `if [ -n "$seen" ] && [ "$seen" -gt ${String(fence)} ]; then echo "fence=$seen" >&2; exit ${String(FENCED)}; fi`,
    `if [ "$seen" != ${String(fence)} ]; then echo ${String(fence)} >${q(`${file}.tmp`)} && mv -f ${q(`${file}.tmp`)} ${q(file)}; fi`,
  ];
}

function aliveFunction(m: RemoteProcess): string {
  return `alive() { [ -n "$1" ] && [ -r /proc/$1/cmdline ] && tr '\\0' ' ' < /proc/$1/cmdline | grep -qF -- ${q(m.marker)}; }`;
}

/** Prints `running=0|1` and, while it runs, `exe=<its program's path>`. */
export function processScript(m: RemoteProcess): string {
  return [
    aliveFunction(m),
    `pid=$(cat ${q(m.pidFile)} 2>/dev/null || true)`,
    `if alive "$pid"; then echo running=1; echo "exe=$(readlink /proc/$pid/exe)"; else echo running=0; fi`,
  ].join('\n');
}

/** Prints `running=0|1`, `startedAt=<ms>`, `data=0|1` and `dataBytes=<bytes in the data dir>`. */
export function describeScript(m: RemoteMember): string {
  return [
    aliveFunction(m),
    `pid=$(cat ${q(m.pidFile)} 2>/dev/null || true)`,
    `if alive "$pid"; then echo running=1; else echo running=0; fi`,
    `echo "startedAt=$(cat ${q(m.startedAtFile)} 2>/dev/null || true)"`,
    `if [ -d ${q(m.dataDir)} ]; then echo data=1; else echo data=0; fi`,
    `echo "dataBytes=$(du -sb ${q(m.dataDir)} 2>/dev/null | cut -f1)"`,
  ].join('\n');
}

/**
 * Prints the member's last write-ahead log file, gzipped, in base64; nothing when it has none. Each WAL
 * file etcd starts begins with the current HardState (`WAL.cut`), so the last file holds the last one.
 * Preallocated with zeros, a file compresses to little more than its records.
 */
export function lastWalScript(m: RemoteMember): string {
  const walDir = `${m.dataDir}/member/wal`;
  return [`f=$(ls ${q(walDir)} 2>/dev/null | grep -E '^[0-9a-f]{16}-[0-9a-f]{16}[.]wal$' | sort | tail -n 1)`, '[ -n "$f" ] || exit 0', `gzip -c < ${q(walDir)}/"$f" | base64`].join('\n');
}

/** What a host must be: Linux, its architecture, and the TCP ports something listens on. */
export const CHECK_SCRIPT = `uname -s; uname -m; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" { print $2 }'`;

/**
 * Starts the program detached in its own session (it outlives the SSH session), unless ours already
 * runs. `$!` is its PID: a background job is never a process group leader, so setsid does not fork.
 */
export function startScript(m: RemoteProcess, binary: string, args: string[], fence: readonly string[]): string {
  return [
    'set -e',
    ...fence,
    aliveFunction(m),
    `pid=$(cat ${q(m.pidFile)} 2>/dev/null || true)`,
    `if alive "$pid"; then exit 0; fi`,
    `mkdir -p ${q(m.dir)} && chmod 700 ${q(m.dir)}`,
    // It must not inherit the fence lock (fd 9): it would hold it for its whole life.
    `setsid ${q(binary)} ${args.map(q).join(' ')} >>${q(m.logFile)} 2>&1 </dev/null 9>&- &`,
    `echo $! >${q(m.pidFile)}`,
    `echo $(($(date +%s%N) / 1000000)) >${q(m.startedAtFile)}`,
  ].join('\n');
}

/** SIGTERM, up to graceMs, then SIGKILL; returns once the process is gone (or only a zombie), waiting up to 15 s after SIGKILL: a killed etcd on a busy host can take seconds to exit. */
export function stopScript(m: RemoteProcess, graceMs: number, fence: readonly string[]): string {
  const ticks = Math.max(0, Math.ceil(graceMs / 100));
  return [
    ...fence,
    aliveFunction(m),
    `gone() { [ ! -e /proc/$1 ] || [ "$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null)" = Z ]; }`,
    `pid=$(cat ${q(m.pidFile)} 2>/dev/null || true)`,
    `alive "$pid" || exit 0`,
    `kill -TERM "$pid" 2>/dev/null || true`,
    `i=0; while alive "$pid" && [ $i -lt ${String(ticks)} ]; do sleep 0.1; i=$((i + 1)); done`,
    `alive "$pid" && kill -KILL "$pid" 2>/dev/null || true`,
    `i=0; while ! gone "$pid" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done`,
    `gone "$pid" || { echo "process $pid survived SIGKILL" >&2; exit 1; }`,
  ].join('\n');
}

/** Stops the member at once and removes everything of it on the host. */
export function wipeScript(m: RemoteMember, fence: readonly string[]): string {
  // The stop runs in a subshell: its early `exit 0` (nothing running) must not skip the removal.
  return [...fence, `(\n${stopScript(m, 0, [])}\n) && rm -rf ${q(m.dir)}`].join('\n');
}

/**
 * Receives one file's content on stdin into `<path>.tmp` with its mode, in a dir created 0700. Content
 * never goes on a command line: /proc/<pid>/cmdline shows those to every user of the host.
 */
export function receiveFileScript(path: string, mode: number): string {
  const dir = path.slice(0, path.lastIndexOf('/'));
  return ['set -e', 'umask 077', `mkdir -p ${q(dir)} && chmod 700 ${q(dir)}`, `cat >${q(`${path}.tmp`)}`, `chmod ${mode.toString(8)} ${q(`${path}.tmp`)}`].join('\n');
}

/** Moves files received with receiveFileScript into place, each atomically. */
export function placeFilesScript(paths: string[]): string {
  return ['set -e', ...paths.map((path) => `mv -f ${q(`${path}.tmp`)} ${q(path)}`)].join('\n');
}

export interface RemoteRestore {
  /** The snapshot tool on the host (etcdutl, or etcdctl before 3.5) and the snapshot copied there. */
  tool: string;
  snapshot: string;
  /** The snapshot was staged on the host by its owner, not copied by fastplane: it is left in place. */
  staged?: boolean;
  sha256: string;
  memberName: string;
  peerURL: string;
  initialCluster: string;
  clusterToken: string;
}

/** Exit status of restoreScript when the copied snapshot is not the one restore checked. */
export const SNAPSHOT_CHANGED = 3;

/** Where a host keeps snapshots staged by their owner, each named by its sha256. */
export function stagedSnapshotPath(baseDir: string, sha256: string): string {
  return `${baseDir}/snapshots/${sha256}.db`;
}

/**
 * Restores the snapshot into the member's data dir, unless one exists (restored or run before): its
 * sha256 is computed on the host while `snapshot restore` writes a staging dir (both read the whole
 * file; side by side they cost one read's time), and the staging dir is renamed into place only when
 * the sum matches, so a data dir exists only complete and only from the right file. A copy is removed
 * either way; a staged snapshot is kept.
 */
export function restoreScript(m: RemoteMember, r: RemoteRestore): string {
  const staging = `${m.dataDir}.restoring`;
  const sumFile = `${m.dataDir}.sha256`;
  const removeCopy = r.staged === true ? 'true' : `rm -f ${q(r.snapshot)}`;
  const what = r.staged === true ? 'staged on the host' : 'copied';
  return [
    'set -e',
    `if [ -d ${q(m.dataDir)} ]; then ${removeCopy}; exit 0; fi`,
    `rm -rf ${q(staging)}`,
    `(sha256sum ${q(r.snapshot)} | cut -d' ' -f1 > ${q(sumFile)}) &`,
    'summing=$!',
    'restored=0',
    `ETCDCTL_API=3 ${q(r.tool)} snapshot restore ${q(r.snapshot)} --data-dir ${q(staging)} --name ${q(r.memberName)} --initial-advertise-peer-urls ${q(r.peerURL)} --initial-cluster ${q(r.initialCluster)} --initial-cluster-token ${q(r.clusterToken)} >/dev/null || restored=$?`,
    'wait "$summing" || true',
    `sum=$(cat ${q(sumFile)} 2>/dev/null || true)`,
    `rm -f ${q(sumFile)}`,
    `if [ "$sum" != ${q(r.sha256)} ]; then rm -rf ${q(staging)}; ${removeCopy}; echo "the snapshot ${what} has sha256 $sum, expected ${r.sha256}: it changed since restore checked it" >&2; exit ${String(SNAPSHOT_CHANGED)}; fi`,
    `if [ "$restored" -ne 0 ]; then rm -rf ${q(staging)}; exit "$restored"; fi`,
    `mv ${q(staging)} ${q(m.dataDir)}`,
    removeCopy,
  ].join('\n');
}

/** The hex TCP port as /proc/net/tcp prints it: 2379 -> 094B. */
export function hexPort(port: number): string {
  return port.toString(16).toUpperCase().padStart(4, '0');
}
