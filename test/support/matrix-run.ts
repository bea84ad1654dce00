import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Etcd3 } from 'etcd3';
import type { EventEntry } from '../../src/cli/commands/events.ts';
import type { MachineRecord } from '../../src/domain/machine.ts';
import { statusOf, type CliEnv, type CliRun } from './cli.ts';
import { httpGet, killReplica, startController, waitFor, type ControllerReplica } from './controller-replica.ts';
import { askEtcd, type ClusterAccess } from './etcd-direct.ts';
import { TEST_KUBERNETES } from './kubectl.ts';
import { downgradeAfterLearners } from './matrix-downgrade.ts';
import { kubernetesScenario } from './matrix-kubernetes.ts';
import { etcdPidsServing, KeyWriter, MemberProbe, overlappingChanges, putAll, readPrefix, type Combination, type RowRun } from './matrix-scenario.ts';
import type { LabInfo } from './netlab.ts';
import { sshKubernetesProvider } from './ssh-kubernetes.ts';

// The combination matrix (test/e2e/matrix-local.test.ts and matrix-ssh.test.ts): one scenario over a
// pairwise-covering set of {local, ssh} provider x {sqlite, etcd} record store x {etcd, fastplane}
// reconfiguration check x {CLI, controller} driver: up 3 with 200 keys, SIGKILL a voter, repaired
// (by `up`, or by the controller alone), backup, 50 more keys, `restore --replace` (exactly the 200
// back), scale 5, scale 3, rollout 3.5.16 -> 3.5.30, down. One more row runs a downgrade after
// parallel learners instead: one etcd 3.6 member with 1000 keys grown to five with several learners
// at once, then rolled out to 3.5 (whose learner limit is 1) by etcd's downgrade protocol, every
// member asked alone for its member list after its restart. The Kubernetes row runs the control plane
// of test/support/matrix-kubernetes.ts on the lab's hosts instead. A writer puts keys all along; etcd is
// asked for its member list all along. The local rows, the ssh rows and the Kubernetes row are three
// files, which the runner may run side by side: each has its own state dir and its own store etcd,
// since a controller row's controller reconciles every control plane of its store; within a file the
// rows run one after another.

type Scenario = 'lifecycle' | 'downgrade-after-learners' | 'kubernetes';
export type Row = Combination & { scenario: Scenario };

export const ROWS: Row[] = [
  { provider: 'local', store: 'sqlite', check: 'etcd', driver: 'cli', scenario: 'lifecycle' },
  { provider: 'local', store: 'etcd', check: 'fastplane', driver: 'controller', scenario: 'lifecycle' },
  { provider: 'ssh', store: 'sqlite', check: 'fastplane', driver: 'controller', scenario: 'lifecycle' },
  { provider: 'ssh', store: 'etcd', check: 'etcd', driver: 'controller', scenario: 'lifecycle' },
  { provider: 'ssh', store: 'etcd', check: 'fastplane', driver: 'cli', scenario: 'lifecycle' },
  // Local: on the lab's hosts this row took 240 s (ssh provisioning and restarts), four times the local one.
  { provider: 'local', store: 'sqlite', check: 'etcd', driver: 'cli', scenario: 'downgrade-after-learners' },
  // The Kubernetes control plane on the lab's hosts, the controller driving it with its records in etcd.
  { provider: 'ssh', store: 'etcd', check: 'etcd', driver: 'controller', scenario: 'kubernetes' },
];

const FROM = '3.5.16';
const TO = '3.5.30';
// The downgrade row: from the newest 3.6 to the newest 3.5 patch installed.
const DOWNGRADE_FROM = '3.6.17';
const DOWNGRADE_TO = '3.5.36';
const DOWNGRADE_KEYS = 1_000;
const SEED = '/seed/';
const WRITER = '/writer/';
// Every step takes under 30 s here; a row that hangs fails at this bound and the next row goes on.
const STEP_TIMEOUT = '90s';

export interface RowResult {
  row: Row;
  name: string;
  ms: number;
  ok: boolean;
  steps: [string, number][];
  error?: string;
}

/** Where a file's rows run: its CLI env, the lab of the ssh rows, the etcd the etcd-store rows keep their records in. */
export interface MatrixSite {
  env: CliEnv;
  lab?: LabInfo;
  store?: { endpoint: string; kv: Etcd3 };
  results: RowResult[];
}

/** The rows' results as a markdown table, for the file's output. */
export function resultsTable(results: RowResult[]): string {
  return ['| # | scenario | provider | store | check | driver | result | seconds | steps (s) |', '|---|---|---|---|---|---|---|---|---|', ...results.map(tableLine)].join('\n');
}

function tableLine(r: RowResult): string {
  const steps = r.steps.map(([what, ms]) => `${what} ${(ms / 1000).toFixed(1)}`).join(', ');
  return `| ${r.name} | ${r.row.scenario} | ${r.row.provider} | ${r.row.store} | ${r.row.check} | ${r.row.driver} | ${r.ok ? 'pass' : `FAIL: ${(r.error ?? '').split('\n')[0] ?? ''}`} | ${(r.ms / 1000).toFixed(1)} | ${steps} |`;
}

function storeFlags(site: MatrixSite, row: Row): string[] {
  if (row.store === 'sqlite') return [];
  assert.ok(site.store, 'the store etcd runs');
  return ['--store', 'etcd', '--etcd-endpoints', site.store.endpoint, '--insecure-store'];
}

function commonSpec(row: Row): Record<string, unknown> {
  switch (row.scenario) {
    case 'lifecycle':
      return { replicas: 3, version: FROM, etcd: { reconfigurationCheck: row.check }, remediation: { unhealthyAfter: '3s' } };
    case 'downgrade-after-learners':
      // One member first; maxLearners auto: on 3.6 the members run --max-learners 8, so the grow to
      // five takes several learner slots at once.
      return { replicas: 1, version: DOWNGRADE_FROM, etcd: { reconfigurationCheck: row.check, maxLearners: 'auto' } };
    case 'kubernetes':
      return { replicas: 3, kubernetes: { version: TEST_KUBERNETES }, etcd: { reconfigurationCheck: row.check }, remediation: { unhealthyAfter: '5s' } };
  }
}

function specOf(site: MatrixSite, row: Row): Record<string, unknown> {
  const common = commonSpec(row);
  if (row.provider === 'local') return common;
  const info = site.lab;
  assert.ok(info, 'the lab is up');
  if (row.scenario === 'kubernetes') return { ...common, provider: sshKubernetesProvider(info) };
  return {
    ...common,
    provider: { name: 'ssh', identityFile: info.identityFile, knownHostsFile: info.knownHostsFile, hosts: info.hosts.map((h) => ({ address: h.address, user: 'root' })) },
  };
}

/** Client URLs of the cluster's machines on record, from whichever store the row uses. */
async function recordedURLs(site: MatrixSite, row: Row, name: string): Promise<string[]> {
  let machines: MachineRecord[];
  if (row.store === 'sqlite') machines = site.env.machines(name);
  else {
    assert.ok(site.store);
    machines = Object.values(await site.store.kv.getAll().prefix(`/fastplane/machines/${name}/`).strings()).map((text) => JSON.parse(text) as MachineRecord);
  }
  return machines.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
}

function seeds(from: number, to: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: to - from }, (_, i) => [`${SEED}${String(from + i).padStart(4, '0')}`, `seed-${String(from + i)}`]));
}

async function stopController(controller: ControllerReplica): Promise<void> {
  if (controller.child.exitCode !== null || controller.child.signalCode !== null) return;
  controller.child.kill('SIGTERM');
  // It exits within its 10 s shutdown deadline; past that it is killed.
  await Promise.race([controller.done, sleep(12_000)]);
  await killReplica(controller);
}

/** Runs one row: its driver, its scenario, and the clean-up whatever happens; prints its table line. */
export async function runRow(site: MatrixSite, index: number, row: Row): Promise<void> {
  const { env } = site;
  const name = `mx${String(index + 1)}`;
  const result: RowResult = { row, name, ms: 0, ok: false, steps: [] };
  site.results.push(result);
  const started = Date.now();
  const ctlId = `ctl-${name}`;
  let controller: ControllerReplica | undefined;
  let probe: MemberProbe | undefined;
  let writer: KeyWriter | undefined;
  // Set by a `down` that exited 0 (inside a closure, hence an object).
  const cluster = { downed: false };
  const cli = (args: string[]): Promise<CliRun> => env.run([...storeFlags(site, row), ...args]);
  const ok = async (what: string, args: string[]): Promise<CliRun> => {
    const run = await cli(args);
    assert.equal(run.code, 0, `${what} exited ${String(run.code)}:\n${run.stderr.slice(-3000)}`);
    if (row.driver === 'controller' && ['up', 'scale', 'rollout'].includes(args[0] ?? '')) {
      assert.match(run.stderr, new RegExp(`${ctlId} (is reconciling|reconciled) ${name}`), `${what}: the controller did the work`);
    }
    if (args[0] === 'down') cluster.downed = true;
    return run;
  };
  const run: RowRun = {
    name,
    manifest: env.writeManifest(name, specOf(site, row)),
    stepTimeout: STEP_TIMEOUT,
    cli,
    ok,
    step: async (what, work) => {
      const from = Date.now();
      try {
        return await work();
      } finally {
        result.steps.push([what, Date.now() - from]);
      }
    },
    watch: async (doc, endpoints) => {
      const tls = doc.status.tls === undefined ? {} : { tls: doc.status.tls };
      const seen = new MemberProbe(tls, () => recordedURLs(site, row, name));
      probe = seen;
      seen.start();
      const written = new KeyWriter(WRITER, tls, () => (seen.voterURLs().length > 0 ? seen.voterURLs() : endpoints()));
      writer = written;
      written.start();
      await waitFor('the writer to have a put acknowledged', () => (written.acks.length > 0 ? true : undefined), 20_000);
      return { probe: seen, writer: written };
    },
    events: async () => {
      return JSON.parse((await ok('events', ['events', name, '-o', 'json'])).stdout) as EventEntry[];
    },
  };
  try {
    if (row.driver === 'controller') {
      const metrics = `${env.addressPrefix}.251.${String(index + 1)}:9464`;
      controller = startController(env, [...storeFlags(site, row), 'controller', '--id', ctlId, '--metrics-address', metrics]);
      await waitFor('the controller /healthz', async () => ((await httpGet(`http://${metrics}/healthz`))?.status === 200 ? true : undefined), 30_000);
    }
    if (row.scenario === 'lifecycle') await lifecycle(run, row);
    else if (row.scenario === 'kubernetes') {
      assert.ok(site.lab, 'the lab is up');
      await kubernetesScenario(run, { env, lab: site.lab });
    } else await downgradeAfterLearners(run, { from: DOWNGRADE_FROM, to: DOWNGRADE_TO, keys: DOWNGRADE_KEYS, prefix: SEED });
    result.ok = true;
  } catch (error) {
    result.error = error instanceof Error ? error.message : String(error);
    // What the controller last said, for the failure's reader.
    for (const line of controller?.lines.slice(-15) ?? []) console.log(`${name} controller: ${line.msg}${line.why === undefined ? '' : ` (${line.why})`}`);
    throw error;
  } finally {
    await writer?.stop();
    await probe?.stop();
    if (!cluster.downed) await cli(['down', name, '--force', '--wait', '1s']);
    if (controller) await stopController(controller);
    result.ms = Date.now() - started;
    console.log(tableLine(result));
  }
}

/** The lifecycle scenario: up 3, repair, backup, restore, scale 5, scale 3, rollout, down. */
async function lifecycle(run: RowRun, row: Row): Promise<void> {
  const { name, manifest, cli, ok, step } = run;
  let doc = statusOf((await step('up', () => ok('up', ['up', '-f', manifest, '--timeout', STEP_TIMEOUT, '-o', 'json']))).stdout);
  assert.equal(doc.status.voters, 3);
  let access: ClusterAccess = doc.status;
  const { probe, writer: written } = await run.watch(doc, () => access.endpoints);
  await putAll(access, seeds(0, 200));

  // SIGKILL a follower voter; the repair is a replacement (the victim removed, a new member promoted).
  const victim = doc.status.machines.find((m) => m.phase === 'Voter' && m.name !== doc.status.leader);
  assert.ok(victim?.clientURL, 'a follower voter to kill');
  const pids = etcdPidsServing(victim.clientURL);
  assert.ok(pids.length > 0, `${victim.name}'s etcd runs`);
  const killedAt = Date.now();
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  await step('repair', async () => {
    const repaired = (d: typeof doc): boolean => d.status.phase === 'Ready' && d.status.voters === 3 && d.status.learners === 0 && !d.status.machines.some((m) => m.name === victim.name);
    if (row.driver === 'cli') {
      doc = statusOf((await ok('up (repair)', ['up', '-f', manifest, '--timeout', STEP_TIMEOUT, '-o', 'json'])).stdout);
      assert.ok(repaired(doc), `up repaired ${name}: ${JSON.stringify(doc.status.machines.map((m) => [m.name, m.phase]))}`);
    } else {
      // The controller alone: the CLI only reads status until the cluster is back to 3 voters.
      const deadline = Date.now() + 90_000;
      for (;;) {
        const read = await cli(['status', name, '-o', 'json']);
        const d = read.code === 0 ? statusOf(read.stdout) : undefined;
        if (d !== undefined && repaired(d)) {
          doc = d;
          break;
        }
        if (Date.now() > deadline) {
          const last = d === undefined ? read.stderr : JSON.stringify({ phase: d.status.phase, machines: d.status.machines.map((m) => [m.name, m.phase]), waits: d.status.waits });
          assert.fail(`the controller did not replace ${victim.name} within 90 s; last status: ${last}`);
        }
        // Each read is a command of about 0.8 CPU s: a second apart they would take most of a core.
        await sleep(3_000);
      }
    }
  });
  access = doc.status;
  const { events } = run;
  const afterKill = (await events()).filter((e) => Date.parse(e.startedAt) >= killedAt && e.result === 'ok');
  assert.ok(afterKill.some((e) => e.action === 'RemoveMember' && e.machine === victim.name), `${victim.name}'s member removed`);
  assert.ok(afterKill.some((e) => e.action === 'PromoteLearner'), 'a replacement promoted');

  const backup = await step('backup', async () => JSON.parse((await ok('backup', ['backup', name, '-o', 'json'])).stdout) as { file: string; revision: number });
  await putAll(access, seeds(200, 250));
  assert.equal(Object.keys(await readPrefix(access, SEED)).length, 250);

  // `restore --replace` deletes the cluster's records, its events with them: keep them first.
  const eventLog = await events();
  const restoreStartedAt = Date.now();
  doc = statusOf((await step('restore', () => ok('restore --replace', ['restore', name, '--from', backup.file, '--replace', '--timeout', STEP_TIMEOUT, '-o', 'json']))).stdout);
  const restoreEndedAt = Date.now();
  assert.equal(doc.status.voters, 3);
  assert.equal(doc.spec.etcd.reconfigurationCheck, row.check, 'the restored cluster keeps its spec');
  access = doc.status;
  assert.deepEqual(await readPrefix(access, SEED), seeds(0, 200), 'exactly the 200 keys of the backup');

  doc = statusOf((await step('scale 5', () => ok('scale 5', ['scale', name, '--replicas', '5', '--timeout', STEP_TIMEOUT, '-o', 'json']))).stdout);
  assert.equal(doc.status.voters, 5);
  doc = statusOf((await step('scale 3', () => ok('scale 3', ['scale', name, '--replicas', '3', '--timeout', STEP_TIMEOUT, '-o', 'json']))).stdout);
  assert.equal(doc.status.voters, 3);
  doc = statusOf((await step('rollout', () => ok('rollout', ['rollout', name, '--version', TO, '--timeout', STEP_TIMEOUT, '-o', 'json']))).stdout);
  access = doc.status;
  const etcdSays = await askEtcd(access);
  assert.deepEqual(etcdSays.members.map((m) => m.isLearner), [false, false, false]);
  assert.deepEqual(etcdSays.statuses.map((s) => s.version), [TO, TO, TO]);

  await written.stop();
  await probe.stop();
  eventLog.push(...(await events()));
  // A restore brings the cluster back to its backup: puts acknowledged after the backup's revision
  // and before the restored cluster was handed back are dropped by definition, so they are not
  // judged. Every other acknowledged put (in the backup, or made to the restored cluster) must read back.
  const judged = written.acks.filter((a) => (a.at < restoreStartedAt && a.revision <= backup.revision) || a.at > restoreEndedAt);
  const final = await readPrefix(access, WRITER);
  const lost = judged.filter((a) => final[a.key] !== a.value).map((a) => a.key);
  assert.deepEqual(lost, [], `${String(lost.length)} of ${String(judged.length)} acknowledged keys lost`);
  assert.ok(judged.some((a) => a.at < restoreStartedAt) && judged.some((a) => a.at > restoreEndedAt), 'the writer was acknowledged before the backup and after the restore');
  assert.ok(probe.lists > 0, 'etcd answered member lists');
  assert.ok(probe.maxLearners <= 1, `etcd listed ${String(probe.maxLearners)} learners: ${probe.maxLearnersList.join('; ')}`);
  // Promotions: up 2 and repair 1 before the restore; restore 2, scale 5 2 and rollout 3 after it.
  assert.ok(eventLog.filter((e) => e.result === 'ok' && e.action === 'PromoteLearner').length >= 10, 'the membership changes of every step are in the log');
  assert.deepEqual(overlappingChanges(eventLog), [], 'no two membership changes overlapped');
  console.log(`${name}: ${String(written.acks.length)} puts acknowledged (${String(judged.length)} judged, ${String(written.failures)} failed), most learners listed ${String(probe.maxLearners)} over ${String(probe.lists)} lists`);

  await step('down', () => ok('down', ['down', name]));
}
