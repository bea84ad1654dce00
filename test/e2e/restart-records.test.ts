import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { cliEnvFactory, pidsUnder, type CliEnv } from '../support/cli.ts';

// A member restarted in place (here by a certificate renewal) runs the flags of the spec as it is at
// the restart: its machine must say so, or the guard follows flags the member no longer runs.
const newEnv = cliEnvFactory();
const env = newEnv('127.36');
const VERSION = '3.5.36';

/** Each running member's command line, by its machine name (`--name`). */
function memberCommandLines(cli: CliEnv): Map<string, string[]> {
  const lines = new Map<string, string[]>();
  for (const pid of pidsUnder(cli.stateDir)) {
    let args: string[];
    try {
      args = readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const name = args[args.indexOf('--name') + 1];
    if (args.includes('--name') && name !== undefined) lines.set(name, args);
  }
  return lines;
}

/** Every running member's etcd checks as its command line has them, against its machine's record. */
function checksOnRecordAndRunning(cli: CliEnv, cluster: string): { machine: string; recorded: boolean | undefined; running: boolean }[] {
  const lines = memberCommandLines(cli);
  return cli.machines(cluster).flatMap((m) => {
    const args = lines.get(m.name);
    return args === undefined ? [] : [{ machine: m.name, recorded: m.strictReconfigCheck, running: !args.includes('--strict-reconfig-check=false') }];
  });
}

describe('a restart in place records the flags its member starts with', { timeout: 300_000 }, () => {
  test('check mode set to fastplane, certificates renewed before the rollout, mode set back: the records follow the members, and etcd\'s checks end up on', async () => {
    const up = await env.run(['up', '--name', 'rec', '--replicas', '3', '--version', VERSION, '--timeout', '90s']);
    assert.equal(up.code, 0, up.stderr);

    // The new mode is stored; the process stops as soon as the rollout's first machine is recorded.
    const switched = await env.run(['up', '--name', 'rec', '--replicas', '3', '--version', VERSION, '--reconfiguration-check', 'fastplane', '--timeout', '90s'], { FASTPLANE_FAILPOINTS: 'after-create-record' });
    assert.equal(switched.signal, 'SIGKILL', switched.stderr);
    assert.equal(env.controlPlaneRecords().find((cp) => cp.name === 'rec')?.manifest.spec.etcd.reconfigurationCheck, 'fastplane');

    const renewed = await env.run(['certs', 'renew', 'rec']);
    assert.equal(renewed.code, 0, renewed.stderr);
    const afterRenewal = checksOnRecordAndRunning(env, 'rec');
    assert.equal(afterRenewal.length, 3, JSON.stringify(afterRenewal));
    assert.deepEqual(afterRenewal, afterRenewal.map((m) => ({ ...m, running: false, recorded: false })), 'the renewal restarted the member without etcd\'s checks, and its machine says so');

    const back = await env.run(['up', '--name', 'rec', '--replicas', '3', '--version', VERSION, '--reconfiguration-check', 'etcd', '--timeout', '120s']);
    assert.equal(back.code, 0, back.stderr);
    const final = checksOnRecordAndRunning(env, 'rec');
    assert.equal(final.length, 3, JSON.stringify(final));
    for (const member of final) {
      assert.equal(member.recorded, member.running, `${member.machine}: the record says what its member runs`);
      assert.equal(member.running, true, `${member.machine} runs etcd's own checks again`);
    }
    assert.equal((await env.run(['down', 'rec'])).code, 0);
  });
});
