import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cliEnvFactory, pidsUnder, statusOf } from '../support/cli.ts';

const newEnv = cliEnvFactory();

interface LogLine {
  level: number;
  msg: string;
  cluster?: string;
  waits?: { code: string; message: string; machine?: string }[];
  actions?: { kind: string; machine?: string }[];
  requeueAfterMs?: number;
  read?: string;
  endpoints?: string[];
  error?: string;
}

const DEBUG = 20;
const INFO = 30;
const WARN = 40;
const MEMBERSHIP_CHANGES = new Set(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);
const HOLDS_ALL = new Set(['QuorumLost', 'MemberListUnavailable']);

function logLines(text: string): LogLine[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as LogLine);
}

describe('logs that help', { timeout: 240_000 }, () => {
  test('a debug log of a 3-member bring-up holds every pass with its waits for the learners, wait and lease changes, and failed reads with their endpoint', async () => {
    const env = newEnv('127.225');
    const up = await env.run(['--log-level', 'debug', '--log-format', 'json', 'up', '--name', 'logs', '--replicas', '3', '--timeout', '90s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const file = logLines(readFileSync(join(env.stateDir, 'fastplane.log'), 'utf8'));

    const passes = file.filter((l) => l.level === DEBUG && l.msg.startsWith('pass:'));
    assert.ok(passes.length > 3, `one debug record per pass, got ${String(passes.length)}`);
    for (const pass of passes) {
      assert.equal(pass.cluster, 'logs');
      assert.ok(Array.isArray(pass.actions) && Array.isArray(pass.waits) && typeof pass.requeueAfterMs === 'number', JSON.stringify(pass));
    }
    // Every learner's add and promotion are logged, and a pass between them that changed no membership
    // says why it left that learner waiting (starting, catching up, the guard), or that the whole
    // membership was held. A quick machine may need no such pass, so the first machine's wait stands
    // for a wait that is always there.
    const waitCodes = new Set(passes.flatMap((p) => p.waits ?? []).map((w) => w.code));
    assert.ok(waitCodes.has('WaitingForFirstMachine'), `the wait for the first machine is logged, got ${[...waitCodes].join(', ')}`);
    const learners = env.machines('logs').filter((m) => m.name !== env.controlPlaneRecords()[0]?.initMachine);
    assert.equal(learners.length, 2);
    for (const learner of learners) {
      const acts = (p: LogLine, kind: string): boolean => p.actions?.some((a) => a.kind === kind && a.machine === learner.name) === true;
      const added = passes.findIndex((p) => acts(p, 'AddLearner'));
      const promoted = passes.map((p) => acts(p, 'PromoteLearner')).lastIndexOf(true);
      assert.ok(added >= 0 && promoted > added, `the passes that added ${learner.name} as a learner and promoted it are logged, in that order`);
      for (const pass of passes.slice(added + 1, promoted)) {
        if (pass.actions?.some((a) => MEMBERSHIP_CHANGES.has(a.kind)) === true) continue;
        const says = pass.waits?.some((w) => w.machine === learner.name || HOLDS_ALL.has(w.code)) === true;
        assert.ok(says, `a pass that left learner ${learner.name} waiting says why: ${JSON.stringify(pass)}`);
      }
    }

    const infos = file.filter((l) => l.level === INFO).map((l) => l.msg);
    assert.ok(infos.some((m) => m.startsWith('waiting: ')), 'a wait that began is logged at info');
    assert.ok(infos.some((m) => m.startsWith('no longer waiting: ')), 'a wait that ended is logged at info');
    assert.ok(infos.some((m) => m.startsWith('lease on logs taken by ')), 'taking the lease is logged');
    assert.ok(infos.includes('lease on logs released'), 'releasing the lease is logged');
    // --log-format json: the same records on stderr, one JSON object per line.
    const stderrJson = up.stderr.split('\n').filter((line) => line.startsWith('{"level":'));
    assert.ok(stderrJson.some((line) => (JSON.parse(line) as LogLine).msg === 'lease on logs released'), 'stderr carries the JSON records');

    // A member whose process is gone: status logs its failed read at warn, with the endpoint.
    const victim = statusOf(up.stdout).status.machines.find((m) => m.clientURL !== null)?.clientURL;
    assert.ok(typeof victim === 'string');
    for (const pid of pidsUnder(`--listen-client-urls\0${victim}`)) process.kill(pid, 'SIGKILL');
    const status = await env.run(['--log-format', 'pretty', 'status', 'logs']);
    assert.equal(status.code, 0, status.stderr);
    const warnings = logLines(readFileSync(join(env.stateDir, 'fastplane.log'), 'utf8')).filter((l) => l.level === WARN && l.read === 'member status');
    assert.ok(warnings.some((w) => w.endpoints?.includes(victim) === true && (w.error ?? '') !== ''), JSON.stringify(warnings));
    assert.match(status.stderr, new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} WARN  observe: member status failed at ${victim.replaceAll('.', '\\.')}`, 'm'));
  });
});
