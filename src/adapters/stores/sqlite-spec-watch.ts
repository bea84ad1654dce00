import Database from 'better-sqlite3';
import type { SpecWatch } from '../../ports/state-store.ts';

/** How often the watch asks SQLite whether anything was committed: cheap, and well under a second. */
const POLL_MS = 100;

interface SpecRow {
  name: string;
  generation: number | null;
  created: number;
}

/**
 * Watches the control-plane specs of one SQLite file for every process that writes it. SQLite has no
 * change notification across processes, so the watch holds its own connection and polls
 * `PRAGMA data_version`, which moves whenever any other connection (the store's own included)
 * commits; only then does it read the generations and report the clusters whose spec changed,
 * appeared or went away. A cluster deleted and created again reads as changed through its createdAt.
 */
export function watchSqliteSpecs(path: string, onChange: (cluster: string) => void): SpecWatch {
  const db = new Database(path);
  db.pragma('busy_timeout = 5000');
  const specs = db.prepare<[], SpecRow>(
    `SELECT name, json_extract(record, '$.generation') AS generation, created_at AS created FROM control_planes`,
  );
  let known = new Map<string, string>();
  let seenVersion: unknown;
  let closed = false;

  const poll = (): void => {
    if (closed) return;
    const version: unknown = db.pragma('data_version', { simple: true });
    if (version === seenVersion) return;
    seenVersion = version;
    const current = new Map(specs.all().map((row) => [row.name, `${String(row.generation ?? 1)}@${String(row.created)}`]));
    const changed = [...new Set([...known.keys(), ...current.keys()])].filter((name) => known.get(name) !== current.get(name));
    known = current;
    for (const name of changed.sort()) onChange(name);
  };
  const safePoll = (): void => {
    try {
      poll();
    } catch {
      // A busy or briefly unreadable file: the next poll reads it again (data_version is re-read).
      seenVersion = undefined;
    }
  };

  // The first poll reports every existing cluster (known starts empty), from a later task so that
  // onChange never runs inside the caller's watchSpecs call.
  const first = setImmediate(safePoll);
  const timer = setInterval(safePoll, POLL_MS);
  return {
    close: () => {
      if (!closed) {
        closed = true;
        clearImmediate(first);
        clearInterval(timer);
        db.close();
      }
      return Promise.resolve();
    },
  };
}
