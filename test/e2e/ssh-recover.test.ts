import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CliEnv, pidsUnder, statusOf } from '../support/cli.ts';
import { askEtcd, kvClientFor } from '../support/etcd-direct.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';
import { leaveBehind } from '../support/lagging-member.ts';

// `recover` over SSH on three lab hosts: the stopped voters' write-ahead logs are read on their hosts,
// so the member with the newest data is chosen even when it is stopped and a lagging one runs; a host
// that does not answer makes recover refuse unless --accept-unreachable.

const LAB = 72;
const lab = new NetLab(LAB);
// The lab's addresses are not loopback; the prefix only keeps any local member of this env apart.
const env = new CliEnv('127.53');
const labEnv = { FPL_LAB: String(LAB) };
const NAME = 'srec';
let info: LabInfo;

/** The member processes of a machine on its host: the hosts share the PID namespace with this one. */
const pidsOf = (machine: string): number[] => pidsUnder(`/clusters/${NAME}/${machine}/data`);

describe('recover over ssh reads every reachable host', { timeout: 900_000 }, () => {
  before(() => {
    info = lab.up(3);
  });
  after(() => {
    lab.down();
    env.cleanup();
  });

  test('voters 1 and 2 SIGKILLed with the newest data, lagging 3 running: refused while a host does not answer, then 1 or 2 chosen and restarted, every key kept', async () => {
    const manifest = env.writeManifest(NAME, {
      replicas: 3,
      version: '3.5.16',
      rollout: { maxSurge: 0 },
      provider: { name: 'ssh', identityFile: info.identityFile, knownHostsFile: info.knownHostsFile, hosts: info.hosts.map((h) => ({ address: h.address, user: 'root' })) },
    });
    const up = await env.run(['up', '-f', manifest, '--timeout', '4m', '-o', 'json'], labEnv);
    assert.equal(up.code, 0, up.stderr.slice(-3000));
    const doc = statusOf(up.stdout);
    const machines = env.machines(NAME);
    assert.equal(machines.length, 3);
    const [first, second, third] = machines.map((m) => m.name);
    assert.ok(first !== undefined && second !== undefined && third !== undefined);
    const hostOf = (machine: string): number => {
      const address = machines.find((m) => m.name === machine)?.address;
      const host = info.hosts.find((h) => h.address === address);
      assert.ok(host, `${machine} is on a lab host`);
      return host.index;
    };
    assert.equal(pidsOf(third).length, 1, `the member of ${third} is seen from here`);

    const acknowledged = await leaveBehind(doc, machines, pidsOf, { lagging: third, ahead: [first, second], prefix: '/srec/', count: 600 });

    lab.partition(['fp'], [hostOf(first)]);
    try {
      const refused = await env.run(['recover', NAME], labEnv);
      assert.equal(refused.code, 3, `${refused.stdout}\n${refused.stderr}`);
      assert.match(refused.stderr, new RegExp(`cannot read the data dir of voter ${first} .*may hold newer data.*--accept-unreachable`));
      const accepted = await env.run(['recover', NAME, '--accept-unreachable'], labEnv);
      assert.equal(accepted.code, 3, `${accepted.stdout}\n${accepted.stderr}`);
      assert.match(accepted.stdout, new RegExp(`host not answering, accepted \\(--accept-unreachable\\): ${first} `));
      assert.match(accepted.stdout, new RegExp(`chosen: ${second} at committed index`), 'the stopped voter with the newest data that could be read');
    } finally {
      lab.heal();
    }

    const dry = await env.run(['recover', NAME], labEnv);
    assert.equal(dry.code, 3, `${dry.stdout}\n${dry.stderr}`);
    const chosen = /chosen: (\S+) at committed index (\d+)/.exec(dry.stdout);
    assert.ok(chosen, dry.stdout);
    assert.ok(chosen[1] === first || chosen[1] === second, `a stopped member with the newest data is chosen, not the lagging ${third}:\n${dry.stdout}`);
    const lagging = new RegExp(`${third}\\s+member \\d+\\s+committed index (\\d+) \\(data dir\\)\\s+running`).exec(dry.stdout);
    assert.ok(lagging, dry.stdout);
    assert.ok(Number(lagging[1]) < Number(chosen[2]), `the paused member lags:\n${dry.stdout}`);
    assert.match(dry.stdout, new RegExp(`1\\. restart (${first}, ${second}|${second}, ${first}) from their data dirs as they were`), dry.stdout);

    const run = await env.run(['recover', NAME, '--yes', '--timeout', '4m'], labEnv);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr.slice(-3000)}`);
    assert.match(run.stdout, /quorum is back: .* restarted from their data dirs, nothing forced/);
    assert.ok(!env.events(NAME).some((e) => e.action === 'ForceNewCluster'), 'nothing forced');
    const status = await env.run(['status', NAME, '-o', 'json'], labEnv);
    const after = statusOf(status.stdout);
    const { members } = await askEtcd(after.status);
    assert.deepEqual(members.filter((m) => !m.isLearner).map((m) => m.name).sort(), [first, second, third].sort(), 'the same three voters');
    const reader = kvClientFor(after.status);
    try {
      const stored = await reader.getAll().prefix('/srec/').keys();
      assert.deepEqual(acknowledged.filter((key) => !stored.includes(key)), [], `every one of the ${String(acknowledged.length)} acknowledged keys is there`);
    } finally {
      reader.close();
    }
    const down = await env.run(['down', NAME], labEnv);
    assert.equal(down.code, 0, down.stderr.slice(-3000));
  });
});
