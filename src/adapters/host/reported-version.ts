import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * The version a program reports when asked (`etcd --version`, `kube-apiserver --version`), asked once
 * per binary. Starting a Go program costs about 0.3 s of CPU, and every command looks at every
 * installed binary to find the version its spec names: so the answer is kept in memory and in a file
 * beside the binary caches, keyed by the binary's path, inode, size and modification time, and a
 * binary replaced in place is asked again. A binary that does not answer is asked again next time.
 */

const inMemory = new Map<string, string | undefined>();

/** Where the answers are kept across processes (FASTPLANE_VERSIONS_FILE for a test's own). */
function versionsFile(): string {
  return process.env.FASTPLANE_VERSIONS_FILE ?? join(homedir(), '.cache', 'fastplane', 'reported-versions.json');
}

function identity(path: string): string | undefined {
  try {
    const stat = statSync(path);
    return `${path}|${String(stat.ino)}|${String(stat.size)}|${String(stat.mtimeMs)}`;
  } catch {
    return undefined;
  }
}

function readKept(): Record<string, string> {
  try {
    const kept: unknown = JSON.parse(readFileSync(versionsFile(), 'utf8'));
    return typeof kept === 'object' && kept !== null ? (kept as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** Best effort: a file that cannot be written only means asking the binary again next time. */
function keep(key: string, version: string): void {
  const file = versionsFile();
  try {
    mkdirSync(dirname(file), { recursive: true });
    const tmp = `${file}.${String(process.pid)}.tmp`;
    writeFileSync(tmp, `${JSON.stringify({ ...readKept(), [key]: version })}\n`);
    renameSync(tmp, file);
  } catch {
    // Nothing lost: the version is asked of the binary again.
  }
}

/** What `path args` prints, parsed by `pattern`'s first group; undefined when it does not run or say. */
export function reportedVersion(path: string, args: readonly string[], pattern: RegExp): string | undefined {
  const key = identity(path);
  if (key === undefined) return undefined;
  const id = `${key}|${args.join(' ')}`;
  if (inMemory.has(id)) return inMemory.get(id);
  let version: string | undefined = readKept()[id];
  if (version === undefined) {
    try {
      const output = execFileSync(path, [...args], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] });
      version = pattern.exec(output)?.[1];
    } catch {
      version = undefined;
    }
    if (version !== undefined) keep(id, version);
  }
  inMemory.set(id, version);
  return version;
}
