import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CliEnv, statusOf } from '../support/cli.ts';
import { kvClientFor } from '../support/etcd-direct.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';

// Learners judged by their progress, on four lab hosts over SSH (one spare for the rollout surge): two learners receive a large
// snapshot together through the leader's slow uplink, each for longer than learnerStuckAfter, and
// answer nothing meanwhile. Their data dirs grow, so neither is taken for stuck.

const LAB = 73;
const lab = new NetLab(LAB);
// The lab's addresses are not loopback; the prefix only keeps any local member of this env apart.
const env = new CliEnv('127.56');
const labEnv = { FPL_LAB: String(LAB) };
const NAME = 'slow';
// Well under the ~90 s each learner takes (two share 8 Mbit/s), and well over the seconds between two
// passes of a loaded machine that read a learner's bytes: 15 s was missed once in a full suite run.
const STUCK_AFTER_S = 30;
let info: LabInfo;

describe('parallel learners on a slow uplink', { timeout: 900_000 }, () => {
  before(() => {
    info = lab.up(4);
  });
  after(() => {
    lab.down();
    env.cleanup();
  });

  test('two learners receiving 48 MB through an 8 Mbit/s uplink, each longer than learnerStuckAfter, are promoted, never marked stuck', async () => {
    const manifest = (replicas: number): string =>
      env.writeManifest(NAME, {
        replicas,
        version: '3.6.17',
        etcd: { maxLearners: 2 },
        remediation: { learnerStuckAfter: `${String(STUCK_AFTER_S)}s` },
        provider: { name: 'ssh', identityFile: info.identityFile, knownHostsFile: info.knownHostsFile, hosts: info.hosts.map((h) => ({ address: h.address, user: 'root' })) },
      });
    const one = await env.run(['up', '-f', manifest(1), '--timeout', '3m', '-o', 'json'], labEnv);
    assert.equal(one.code, 0, one.stderr.slice(-3000));
    const kv = kvClientFor(statusOf(one.stdout).status);
    const value = 'v'.repeat(16 * 1024);
    try {
      for (let i = 0; i < 3000; i += 100) {
        await Promise.all(Array.from({ length: 100 }, (_, j) => kv.put(`/slow/${String(i + j).padStart(5, '0')}`).value(value)));
      }
    } finally {
      kv.close();
    }
    const [leader] = env.machines(NAME);
    const leaderHost = info.hosts.find((h) => h.address === leader?.address);
    assert.ok(leaderHost, 'the first member is on a lab host');
    lab.rate('8mbit', [leaderHost.index]);

    const three = await env.run(['up', '-f', manifest(3), '--timeout', '8m', '-o', 'json'], labEnv);
    assert.equal(three.code, 0, `${three.stdout.slice(-2000)}\n${three.stderr.slice(-3000)}`);
    const events = env.events(NAME);
    assert.deepEqual(
      events.filter((e) => e.reason === 'LearnerStuck').map((e) => `${e.machine ?? ''}: ${e.message}`),
      [],
      'no learner was taken for stuck',
    );
    const joined = env.machines(NAME).filter((m) => m.name !== leader?.name);
    assert.equal(joined.length, 2);
    for (const m of joined) {
      assert.equal(m.failed, undefined, `${m.name} not failed`);
      const { Joining: joiningAt, Voter: voterAt } = m.phaseTimes;
      assert.ok(joiningAt !== undefined && voterAt !== undefined, `${m.name} went from Joining to Voter`);
      // Slower than learnerStuckAfter: judged by silence, it would have been removed.
      assert.ok(voterAt - joiningAt > STUCK_AFTER_S * 1000, `${m.name} caught up in ${String((voterAt - joiningAt) / 1000)} s, not longer than ${String(STUCK_AFTER_S)} s`);
    }
    lab.heal();
    const down = await env.run(['down', NAME], labEnv);
    assert.equal(down.code, 0, down.stderr.slice(-3000));
  });
});
