import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defaultControlPlane, type ControlPlane } from '../../src/api/control-plane.ts';
import { formatDuration, parseDuration, parseDurationRange } from '../../src/api/duration.ts';
import { mostCrowdedDomains, spreadOverFailureDomains } from '../../src/domain/failure-domains.ts';
import { keepsQuorum, quorum } from '../../src/domain/quorum.ts';
import { selectVictims, type VictimCandidate } from '../../src/domain/selection.ts';
import { templateHash } from '../../src/domain/template.ts';
import { machineTemplateHash } from '../../src/planner/spec.ts';

describe('quorum', () => {
  test('quorum is a strict majority of the voters', () => {
    const table: [number, number][] = [
      [1, 1],
      [2, 2],
      [3, 2],
      [4, 3],
      [5, 3],
      [6, 4],
      [7, 4],
      [9, 5],
    ];
    for (const [voters, expected] of table) assert.equal(quorum(voters), expected, `quorum(${String(voters)})`);
  });

  test('keepsQuorum projects the voter set a change produces (invariant 4) and never empties it (invariant 6)', () => {
    const table: { name: string; args: [number, number, number, number]; expected: boolean }[] = [
      { name: 'remove a healthy voter from 3 healthy', args: [3, 3, -1, -1], expected: true },
      { name: 'remove a healthy voter from 3 with one dead', args: [3, 2, -1, -1], expected: false },
      { name: 'remove the dead voter from 3 with one dead', args: [3, 2, -1, 0], expected: true },
      { name: 'remove a healthy voter from 2 healthy', args: [2, 2, -1, -1], expected: true },
      { name: 'remove the last voter', args: [1, 1, -1, -1], expected: false },
      { name: 'remove the last (dead) voter', args: [1, 0, -1, 0], expected: false },
      { name: 'add an unproven voter to 3 healthy', args: [3, 3, 1, 0], expected: true },
      { name: 'add an unproven voter to 3 with one dead', args: [3, 2, 1, 0], expected: false },
      { name: 'promote a proven learner into 3 with one dead', args: [3, 2, 1, 1], expected: true },
      { name: 'remove a dead voter from 5 with two dead', args: [5, 3, -1, 0], expected: true },
      { name: 'remove a healthy voter from 5 with two dead', args: [5, 3, -1, -1], expected: false },
      { name: 'no change on a healthy cluster', args: [3, 3, 0, 0], expected: true },
      { name: 'no change on a cluster without quorum', args: [3, 1, 0, 0], expected: false },
    ];
    for (const row of table) assert.equal(keepsQuorum(...row.args), row.expected, row.name);
  });
});

describe('failure domains', () => {
  test('spreadOverFailureDomains fills the least crowded domain first and updates counts after each placement', () => {
    const table: { name: string; domains: string[]; existing: (string | undefined)[]; count: number; expected: (string | undefined)[] }[] = [
      { name: 'no domains', domains: [], existing: [], count: 3, expected: [undefined, undefined, undefined] },
      { name: 'empty batch of 5 over 3', domains: ['a', 'b', 'c'], existing: [], count: 5, expected: ['a', 'b', 'c', 'a', 'b'] },
      { name: 'fills the gaps first', domains: ['a', 'b', 'c'], existing: ['a', 'a', 'b'], count: 3, expected: ['c', 'b', 'c'] },
      { name: 'ignores unknown and missing domains', domains: ['a', 'b'], existing: ['z', undefined, 'b'], count: 2, expected: ['a', 'a'] },
      { name: 'ties go to the domain listed first', domains: ['b', 'a'], existing: [], count: 1, expected: ['b'] },
      { name: 'count 0', domains: ['a'], existing: ['a'], count: 0, expected: [] },
    ];
    for (const row of table) assert.deepEqual(spreadOverFailureDomains(row.domains, row.existing, row.count), row.expected, row.name);
  });

  test('a batch is never more than one machine apart between domains', () => {
    for (let count = 1; count <= 9; count++) {
      const placed = spreadOverFailureDomains(['a', 'b', 'c'], [], count);
      const counts = ['a', 'b', 'c'].map((d) => placed.filter((p) => p === d).length);
      assert.ok(Math.max(...counts) - Math.min(...counts) <= 1, `count ${String(count)}: ${counts.join(',')}`);
    }
  });

  test('mostCrowdedDomains returns every domain tied for the most machines', () => {
    assert.deepEqual(mostCrowdedDomains(['a', 'b', 'a']), new Set(['a']));
    assert.deepEqual(mostCrowdedDomains(['a', 'b']), new Set(['a', 'b']));
    assert.deepEqual(mostCrowdedDomains([undefined, undefined, 'a']), new Set([undefined]));
    assert.deepEqual(mostCrowdedDomains([]), new Set());
  });
});

describe('victim selection', () => {
  function cand(name: string, opts: Partial<Omit<VictimCandidate, 'name'>> = {}): VictimCandidate {
    const ordinal = Number(name.split('-')[1]);
    return { name, ordinal, createdAt: 1000 * ordinal, notMember: false, unhealthy: false, outdated: false, ...opts };
  }
  const names = (vs: VictimCandidate[]): string[] => vs.map((v) => v.name);

  test('selectVictims ranks non-members, then unhealthy, then outdated, then healthy', () => {
    const pool = [cand('t-1'), cand('t-2', { outdated: true }), cand('t-3', { unhealthy: true }), cand('t-4', { notMember: true })];
    assert.deepEqual(names(selectVictims(pool, 1)), ['t-4']);
    assert.deepEqual(names(selectVictims(pool, 2)), ['t-4', 't-3']);
    assert.deepEqual(names(selectVictims(pool, 3)), ['t-4', 't-3', 't-2']);
    assert.deepEqual(names(selectVictims(pool, 4)), ['t-4', 't-3', 't-2', 't-1']);
  });

  test('selectVictims takes from the most crowded failure domain, recounting after each pick, then the oldest', () => {
    const pool = [cand('t-1', { failureDomain: 'b' }), cand('t-2', { failureDomain: 'a' }), cand('t-3', { failureDomain: 'c' }), cand('t-4', { failureDomain: 'a' })];
    // a holds two: its oldest (t-2) goes first although t-1 is older; then every domain holds one.
    assert.deepEqual(names(selectVictims(pool, 2)), ['t-2', 't-1']);
  });

  test('selectVictims prefers a cheaper rank over a crowded domain', () => {
    const pool = [cand('t-1', { failureDomain: 'a' }), cand('t-2', { failureDomain: 'a' }), cand('t-3', { failureDomain: 'b', notMember: true })];
    assert.deepEqual(names(selectVictims(pool, 1)), ['t-3']);
  });

  test('selectVictims breaks createdAt ties by ordinal and stops when candidates run out', () => {
    const pool = [cand('t-7', { createdAt: 5 }), cand('t-3', { createdAt: 5 }), cand('t-5', { createdAt: 9 })];
    assert.deepEqual(names(selectVictims(pool, 1)), ['t-3']);
    assert.deepEqual(names(selectVictims(pool, 10)), ['t-3', 't-7', 't-5']);
    assert.deepEqual(selectVictims(pool, 0), []);
    assert.deepEqual(selectVictims([], 2), []);
  });
});

describe('template hash', () => {
  function withSpec(mutate: (cp: ControlPlane) => void): ControlPlane {
    // A deep copy: defaultControlPlane shares its nested default objects between calls.
    const cp = structuredClone(defaultControlPlane('t'));
    mutate(cp);
    return cp;
  }

  test('templateHash is stable: independent of key order, 8 hex digits, pinned for the default manifest', () => {
    assert.equal(templateHash({ a: 1, b: 'x', c: true }), templateHash({ c: true, b: 'x', a: 1 }));
    assert.match(templateHash({ a: 1 }), /^[0-9a-f]{8}$/);
    assert.equal(templateHash({ a: 1 }), templateHash({ a: 1 }));
    // Stored machine records compare against this: a changed value rolls out every existing cluster.
    // (It changed once, when maxLearners became auto: 3.6 members then run --max-learners 8.)
    assert.equal(machineTemplateHash(defaultControlPlane('t')), '2d25215f');
  });

  test('templateHash changes with any value, type or key', () => {
    const base = templateHash({ a: 1, b: 'x' });
    for (const other of [{ a: 2, b: 'x' }, { a: '1', b: 'x' }, { a: 1, b: 'y' }, { a: 1, b: 'x', c: 0 }, { a: 1 }]) {
      assert.notEqual(templateHash(other), base, JSON.stringify(other));
    }
  });

  test('machineTemplateHash follows the fields that need new machines, and only those', () => {
    const base = machineTemplateHash(defaultControlPlane('t'));
    assert.equal(machineTemplateHash(defaultControlPlane('other-name')), base, 'the name does not roll out');
    assert.equal(machineTemplateHash(withSpec((cp) => (cp.spec.replicas = 5))), base, 'scaling is not a rollout');
    assert.equal(machineTemplateHash(withSpec((cp) => (cp.spec.version = '3.7.4'))), base, 'the version is tracked on its own');
    // What the members run, not the setting: auto is 1 below 3.6, so older clusters do not roll for it.
    const on35 = (maxLearners: 'auto' | number) => machineTemplateHash(withSpec((cp) => ((cp.spec.version = '3.5.16'), (cp.spec.etcd.maxLearners = maxLearners))));
    assert.equal(on35('auto'), on35(1), 'auto on 3.5 runs the one learner 3.5 allows');
    assert.equal(machineTemplateHash(withSpec((cp) => (cp.spec.provider.provisioningDelay = '3s-8s'))), base);
    assert.notEqual(machineTemplateHash(withSpec((cp) => (cp.spec.etcd.quotaBackendBytes = 8_589_934_592))), base);
    assert.notEqual(machineTemplateHash(withSpec((cp) => (cp.spec.etcd.maxLearners = 2))), base);
    assert.notEqual(machineTemplateHash(withSpec((cp) => (cp.spec.etcd.maxLearners = 1))), base, 'auto on 3.6 is not 1');
  });
});

describe('durations', () => {
  test('parseDuration accepts ms, s, m, h and decimals; rejects everything else', () => {
    const table: [string, number | undefined][] = [
      ['500ms', 500],
      ['8s', 8000],
      ['2m', 120_000],
      ['1h', 3_600_000],
      ['1.5s', 1500],
      ['0.25s', 250],
      ['0s', 0],
      [' 8s ', 8000],
      ['8', undefined],
      ['', undefined],
      ['-1s', undefined],
      ['8S', undefined],
      ['1.s', undefined],
      ['.5s', undefined],
      ['8 s', undefined],
      ['1e3ms', undefined],
      ['1d', undefined],
      ['s', undefined],
    ];
    for (const [text, expected] of table) assert.equal(parseDuration(text), expected, JSON.stringify(text));
  });

  test('parseDurationRange accepts a fixed delay or min-max, and refuses reversed or malformed ranges', () => {
    const table: [string, { minMs: number; maxMs: number } | undefined][] = [
      ['8s', { minMs: 8000, maxMs: 8000 }],
      ['3s-8s', { minMs: 3000, maxMs: 8000 }],
      ['500ms-1s', { minMs: 500, maxMs: 1000 }],
      ['3s-3s', { minMs: 3000, maxMs: 3000 }],
      ['9s-3s', undefined],
      ['1s-999ms', undefined],
      ['3s-', undefined],
      ['-3s', undefined],
      ['3s-8s-9s', undefined],
      ['3-8s', undefined],
      ['', undefined],
    ];
    for (const [text, expected] of table) assert.deepEqual(parseDurationRange(text), expected, JSON.stringify(text));
  });

  test('formatDuration renders the way users write durations', () => {
    const table: [number, string][] = [
      [0, '0ms'],
      [1, '1ms'],
      [999, '999ms'],
      [1000, '1s'],
      [1500, '1.5s'],
      [1049, '1s'],
      [1050, '1.1s'],
      [60_000, '1m'],
      [90_000, '1.5m'],
      [3_600_000, '1h'],
      [5_400_000, '1.5h'],
      [86_400_000, '24h'],
    ];
    for (const [ms, expected] of table) assert.equal(formatDuration(ms), expected, String(ms));
  });

  test('formatDuration output parses back to the same duration within its rounding', () => {
    for (const ms of [0, 7, 250, 999, 1000, 1234, 8000, 59_999, 60_000, 61_000, 119_999, 3_599_999, 3_600_000, 7_200_000]) {
      const text = formatDuration(ms);
      const back = parseDuration(text);
      assert.ok(back !== undefined, `${text} parses`);
      assert.ok(Math.abs(back - ms) <= Math.max(1, ms * 0.05), `${String(ms)} -> ${text} -> ${String(back)}`);
    }
  });
});
