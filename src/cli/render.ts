import { createRequire } from 'node:module';
import { InvalidInputError } from '../api/errors.ts';
import type { ControlPlaneStatusDocument } from '../reconciler/status.ts';
import { renderTable } from './table.ts';

export type OutputFormat = 'table' | 'json' | 'yaml';

export function parseOutput(text: string): OutputFormat {
  if (text === 'table' || text === 'json' || text === 'yaml') return text;
  throw new InvalidInputError([`-o: must be table, json or yaml, got ${text}`]);
}

/** `-o` of commands whose result is a record or a list: a table for people, JSON for scripts. */
export function tableOrJson(text: string): 'table' | 'json' {
  if (text === 'table' || text === 'json') return text;
  throw new InvalidInputError([`-o: must be table or json, got ${text}`]);
}

function table(doc: ControlPlaneStatusDocument): string {
  const s = doc.status;
  const kubernetes = s.kubernetes === undefined ? '' : `  kubernetes ${s.kubernetes.version}  endpoint ${s.kubernetes.endpoint === null ? '-' : `https://${s.kubernetes.endpoint}`}`;
  const head = `${doc.name}: ${s.phase}  voters ${String(s.voters)}/${String(s.replicas)}  learners ${String(s.learners)}  leader ${s.leader ?? '-'}  version ${doc.spec.version}${kubernetes}`;
  // A Kubernetes machine's conditions that are not True, by name (KCP's), or `ready`.
  const components = (m: (typeof s.machines)[number]): string[] => (s.kubernetes === undefined ? [] : [m.conditions?.filter((c) => c.status !== 'True').map((c) => `${c.type}=${c.reason}`).join(',') || 'ready']);
  const machines = renderTable([
    ['MACHINE', 'PHASE', 'ROLE', 'MEMBER ID', 'CLIENT URL', 'VERSION', 'DOMAIN', ...(s.kubernetes === undefined ? [] : ['COMPONENTS'])],
    ...s.machines.map((m) => [m.name, m.phase, m.role ?? '-', m.memberId ?? '-', m.clientURL ?? '-', m.version, m.failureDomain ?? '-', ...components(m)]),
  ]);
  const conditions = renderTable([['CONDITION', 'STATUS', 'REASON', 'MESSAGE'], ...s.conditions.map((c) => [c.type, c.status, c.reason, c.message])]);
  return [head, '', machines, '', conditions].join('\n');
}

/** One document, or an array for `status` without a name. */
export function render(docs: ControlPlaneStatusDocument | ControlPlaneStatusDocument[], format: OutputFormat): string {
  if (format === 'json') return JSON.stringify(docs, null, 2);
  // yaml loads only for -o yaml: every other start skips it.
  if (format === 'yaml') return (createRequire(import.meta.url)('yaml') as typeof import('yaml')).stringify(docs);
  const list = Array.isArray(docs) ? docs : [docs];
  if (list.length === 0) return 'no control planes';
  return list.map(table).join('\n\n');
}

/** Planner waits, one per line, for `status --explain`. */
export function explain(doc: ControlPlaneStatusDocument): string {
  if (doc.status.waits.length === 0) return doc.status.phase === 'Ready' ? `${doc.name} is converged: nothing to wait for.` : `${doc.name}: no waits reported.`;
  return [`${doc.name} is waiting for:`, ...doc.status.waits.map((w) => `  - [${w.code}] ${w.message}`)].join('\n');
}

/** A line a use case says while it works: on stderr, so stdout carries only the result. */
export function noteOnStderr(text: string): void {
  process.stderr.write(`${text}\n`);
}
