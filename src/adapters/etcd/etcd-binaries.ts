import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { InvalidInputError } from '../../api/errors.ts';
import { reportedVersion } from '../host/reported-version.ts';

/**
 * Finds etcd binaries by the version they report, so a machine runs exactly the version its spec
 * names. Places looked at: a control plane's own directory (`spec.etcd.binaries`) for the version its
 * spec names, `$FASTPLANE_ETCD_PATH` (colon-separated dirs, an explicit override), the cache folder
 * filled by scripts/install-etcd.sh, and Debian's /usr/bin/etcd.
 */

const SYSTEM_ETCD = '/usr/bin/etcd';

export function etcdCacheDir(): string {
  return process.env.FASTPLANE_ETCD_CACHE ?? join(homedir(), '.cache', 'fastplane', 'etcd');
}

function candidatePaths(): string[] {
  const fromEnv = (process.env.FASTPLANE_ETCD_PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir !== '')
    .map((dir) => join(dir, 'etcd'));
  const cache = etcdCacheDir();
  const cached = existsSync(cache)
    ? readdirSync(cache)
        .filter((entry) => !entry.startsWith('.'))
        .sort()
        .map((entry) => join(cache, entry, 'usr', 'bin', 'etcd'))
    : [];
  return [...new Set([...fromEnv, ...cached, SYSTEM_ETCD])].filter((path) => existsSync(path));
}

/** Parses `etcd Version: 3.4.23` from `etcd --version`; undefined when the binary does not run. */
export function binaryVersion(path: string): string | undefined {
  return reportedVersion(path, ['--version'], /^etcd Version:\s*(\S+)/m);
}

function installed(): { path: string; version: string }[] {
  return candidatePaths().flatMap((path) => {
    const version = binaryVersion(path);
    return version === undefined ? [] : [{ path, version }];
  });
}

/** Every etcd version available here, sorted and without duplicates. */
export function listEtcdVersions(): string[] {
  return [...new Set(installed().map((binary) => binary.version))].sort();
}

/** The path of an etcd binary reporting exactly `version` (e.g. "3.4.23"). */
export function findEtcdBinary(version: string): string {
  const binaries = installed();
  const match = binaries.find((binary) => binary.version === version);
  if (match) return match.path;
  const found = [...new Set(binaries.map((binary) => binary.version))].sort();
  throw new InvalidInputError([
    `etcd ${version} is not installed (found: ${found.length > 0 ? found.join(', ') : 'none'}); ` +
      `run \`bash scripts/install-etcd.sh\` to install etcd 3.4, 3.5, 3.6 and 3.7, or give a directory holding ` +
      `an etcd ${version} binary (--etcd-binaries DIR, spec.etcd.binaries, or FASTPLANE_ETCD_PATH)`,
  ]);
}

/**
 * The etcd in a directory of one's own (`spec.etcd.binaries`, with etcdctl and etcdutl beside it),
 * checked against the version the spec names: a mismatch would run another version than the spec
 * says, so it is refused naming both.
 */
export function etcdInDirectory(dir: string, version: string): string {
  const path = join(dir, 'etcd');
  if (!existsSync(path)) throw new InvalidInputError([`spec.etcd.binaries: ${dir} holds no etcd binary`]);
  const reported = binaryVersion(path);
  if (reported === undefined) throw new InvalidInputError([`spec.etcd.binaries: ${path} does not run (etcd --version failed)`]);
  if (reported !== version) {
    throw new InvalidInputError([`spec.etcd.binaries: ${path} is etcd ${reported}, but spec.version is ${version}`]);
  }
  return path;
}

/** The etcd binary a spec runs: from its own directory when it names one, else the installed one. */
export function specEtcdBinary(version: string, binaries: string | undefined): string {
  return binaries === undefined ? findEtcdBinary(version) : etcdInDirectory(binaries, version);
}

/**
 * Binary lookup for a control plane's machines: its own directory serves the version it holds; other
 * versions (machines not yet rolled to the spec's version) come from the installed ones.
 */
export function etcdBinaryFinder(binaries: string | undefined): (version: string) => string {
  if (binaries === undefined) return findEtcdBinary;
  const own = join(binaries, 'etcd');
  return (version) => (existsSync(own) && binaryVersion(own) === version ? own : findEtcdBinary(version));
}
