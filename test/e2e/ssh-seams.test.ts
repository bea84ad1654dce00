import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CliEnv, statusOf, type CliRun } from '../support/cli.ts';
import { kvClientFor, type ClusterAccess } from '../support/etcd-direct.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';

// The ssh provider's seams, end to end on four lab hosts with a create hook that takes 10 s and
// counts its calls: `status` beside `up` only reads (no second hook call, no host taken twice); no
// private key is ever on a command line on the hosts, during `up` or a CA rotation; `restore
// --replace` brings back exactly the backed-up keys on the hosts.

const LAB = 64;
const ROOT = join(import.meta.dirname, '..', '..');
const HOOK = `bash ${join(ROOT, 'examples', 'netlab-provision.sh')}`;
const lab = new NetLab(LAB);
// The lab's addresses are not loopback; the prefix only keeps any local member of this env apart.
const env = new CliEnv('127.94');
const labEnv = { FPL_LAB: String(LAB) };
const HOST_DIR = '/var/lib/fastplane';
let info: LabInfo;
let scanner: ChildProcess | undefined;

/**
 * Every distinct command line on the machine that names the hosts' fastplane dir, read from /proc
 * until SIGTERM, then printed as JSON. The lab's hosts are network (and mount) namespaces only: they
 * share the PID namespace, so this one loop sees every process of every host, as each host's users do.
 */
const SCANNER = `
const { readdirSync, readFileSync } = require('node:fs');
const seen = new Set();
let stop = false;
process.on('SIGTERM', () => { stop = true; });
(async () => {
  while (!stop) {
    for (const pid of readdirSync('/proc')) {
      if (!/^\\d+$/.test(pid) || Number(pid) === process.pid) continue;
      let line;
      try { line = readFileSync('/proc/' + pid + '/cmdline', 'latin1'); } catch { continue; }
      if (line.includes(${JSON.stringify(HOST_DIR)}) && seen.size < 20000) seen.add(line.replaceAll('\\0', ' '));
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  process.stdout.write(JSON.stringify([...seen]));
})();
`;

function startScanner(): { stop: () => Promise<string[]> } {
  const child = spawn(process.execPath, ['-e', SCANNER], { stdio: ['ignore', 'pipe', 'inherit'] });
  scanner = child;
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return {
    stop: async () => {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
      scanner = undefined;
      return JSON.parse(out) as string[];
    },
  };
}

/** Key material in a command line: the PEM text, or base64 of it at any alignment. */
function keyMaterialIn(line: string, keys: Buffer[]): string | undefined {
  if (line.includes('PRIVATE KEY')) return 'PRIVATE KEY';
  for (const token of line.match(/[A-Za-z0-9+/=]{40,}/g) ?? []) {
    for (let shift = 0; shift < 4; shift++) {
      if (Buffer.from(token.slice(shift), 'base64').toString('latin1').includes('PRIVATE KEY')) return `base64 ${token.slice(0, 40)}...`;
    }
  }
  const hit = keys.find((key) => line.includes(key.toString('base64').slice(4, 64)));
  return hit === undefined ? undefined : 'base64 of a key file';
}

/** Every private key of the cluster, here and on the hosts. */
function keyFiles(cluster: string): Buffer[] {
  const dirs = [join(env.stateDir, 'clusters', cluster), ...info.hosts.map((h) => join(h.baseDir, 'clusters', cluster))];
  const found: Buffer[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.key')) found.push(readFileSync(path));
    }
  };
  for (const dir of dirs) walk(dir);
  return found;
}

function expectOk(run: CliRun, what: string): void {
  assert.equal(run.code, 0, `${what} exited ${String(run.code)}:\n${run.stderr.slice(-3000)}`);
}

async function access(cluster: string): Promise<ClusterAccess> {
  const run = await env.run(['status', cluster, '-o', 'json'], labEnv);
  expectOk(run, 'status');
  return statusOf(run.stdout).status;
}

async function keysOf(cluster: string): Promise<Record<string, string>> {
  const kv = kvClientFor(await access(cluster));
  try {
    return await kv.getAll().prefix('/').strings();
  } finally {
    kv.close();
  }
}

async function put(cluster: string, entries: Record<string, string>): Promise<void> {
  const kv = kvClientFor(await access(cluster));
  try {
    await Promise.all(Object.entries(entries).map(([key, value]) => kv.put(key).value(value)));
  } finally {
    kv.close();
  }
}

describe('ssh provider seams on the network lab', { timeout: 900_000 }, () => {
  const calls = (): number => (existsSync(join(env.stateDir, 'hook-calls')) ? readFileSync(join(env.stateDir, 'hook-calls'), 'utf8').split('\n').filter(Boolean).length : 0);

  before(() => {
    info = lab.up(4);
  });
  after(() => {
    scanner?.kill('SIGKILL');
    lab.down();
    env.cleanup();
  });

  test('status beside up only reads, and no private key is on a command line during up or a CA rotation', async () => {
    const manifest = env.writeManifest('seams', {
      replicas: 3,
      version: '3.4.23',
      provider: {
        name: 'ssh',
        identityFile: info.identityFile,
        knownHostsFile: info.knownHostsFile,
        provision: {
          create: `echo "$$" >>${join(env.stateDir, 'hook-calls')}; sleep 10; HOOK_DELAY=0-0 ${HOOK} create`,
          delete: `${HOOK} delete`,
          timeout: '1m',
        },
      },
    });
    const scan = startScanner();
    const up = env.start(['up', '-f', manifest, '--timeout', '4m'], labEnv);
    let upEnded = false;
    void up.done.finally(() => (upEnded = true));
    const ended = (): boolean => upEnded;
    const seenPhases = new Set<string>();
    let statuses = 0;
    while (!ended()) {
      const status = await env.run(['status', 'seams', '-o', 'json'], labEnv);
      if (ended()) break;
      // Before up stores the spec, there is nothing to describe yet.
      if (status.code !== 0) continue;
      statuses++;
      for (const machine of statusOf(status.stdout).status.machines) seenPhases.add(machine.phase);
    }
    expectOk(await up.done, 'up');
    const machines = env.machines('seams');
    assert.equal(machines.length, 3);
    assert.equal(calls(), machines.length, 'one create hook call per machine: status never provisioned');
    // The hook's 10 s are a machine's Pending phase (the executor records Provisioning when create returns).
    assert.ok(statuses >= 2 && (seenPhases.has('Pending') || seenPhases.has('Provisioning')), `status ran while machines provisioned (${String(statuses)} runs, phases ${[...seenPhases].join(',')})`);
    const events = await env.run(['events', 'seams', '-o', 'json'], labEnv);
    expectOk(events, 'events');
    const parsed = JSON.parse(events.stdout) as { action: string; reason: string; result: string; message: string }[];
    assert.deepEqual(parsed.filter((e) => e.reason === 'ProvisioningFailed' || (e.action === 'CreateMachine' && e.result !== 'ok')), []);

    expectOk(await env.run(['certs', 'renew', 'seams', '--ca'], labEnv), 'certs renew --ca');
    const lines = await scan.stop();
    const keys = keyFiles('seams');
    assert.ok(keys.length >= 3 * 2, `the cluster's keys were found (${String(keys.length)})`);
    // The scan saw the commands fastplane ran on the hosts, so it would have seen keys among them.
    assert.ok(lines.filter((line) => line.includes(`${HOST_DIR}/clusters/seams/`)).length >= 10, `${String(lines.length)} command lines seen`);
    const leaks = lines.flatMap((line) => {
      const what = keyMaterialIn(line, keys);
      return what === undefined ? [] : [`${what} in: ${line.slice(0, 200)}`];
    });
    assert.deepEqual(leaks, []);
  });

  test('restore --replace on the hosts has exactly the backed-up keys, by etcdctl (3.4) and by etcdutl (3.5)', async () => {
    const backedUp = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`/kept/${String(i).padStart(3, '0')}`, `value-${String(i)}`]));
    await put('seams', backedUp);
    const backup = await env.run(['backup', 'seams', '-o', 'json'], labEnv);
    expectOk(backup, 'backup');
    const { file } = JSON.parse(backup.stdout) as { file: string };
    await put('seams', { '/later/1': 'not in the backup', '/later/2': 'nor this' });
    const before = calls();

    expectOk(await env.run(['restore', 'seams', '--from', file, '--replace', '--timeout', '4m'], labEnv), 'restore --replace');
    assert.equal(calls(), before + 3, 'the restored cluster is three new machines');
    assert.deepEqual(await keysOf('seams'), backedUp);

    // The same 3.4 snapshot into 3.5, whose hosts restore it with etcdutl instead of etcdctl.
    await put('seams', { '/later/3': 'not in the backup either' });
    expectOk(await env.run(['restore', 'seams', '--from', file, '--replace', '--version', '3.5.16', '--timeout', '4m'], labEnv), 'restore --replace --version 3.5.16');
    assert.deepEqual(await keysOf('seams'), backedUp);
    // Each restore's first member had its version's snapshot tool copied to its host.
    const bins = info.hosts.map((host) => join(host.baseDir, 'bin')).filter((bin) => existsSync(bin));
    const tools = new Set(bins.flatMap((bin) => readdirSync(bin).filter((name) => !name.startsWith('etcd-') && !name.endsWith('.sha256'))));
    assert.deepEqual([...tools].sort(), ['etcdctl-3.4.23', 'etcdutl-3.5.16']);
    expectOk(await env.run(['down', 'seams'], labEnv), 'down');
  });
});
