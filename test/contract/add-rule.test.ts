import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Etcd3Admin, readTlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import { findEtcdBinary, listEtcdVersions } from '../../src/adapters/etcd/etcd-binaries.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { initSample, initToken, joinSample, machine, type CalibrationWorld } from '../../src/bench/calibration.ts';
import { addRuleFor } from '../../src/bench/critical-path-bound.ts';
import { EtcdAdminError } from '../../src/ports/etcd-admin.ts';

// The add rule the critical-path bound applies per etcd version (src/bench/critical-path-bound.ts),
// measured on each installed version: a learner add right after a promotion, with 2 voters (both
// rules wait for the new voter's 5 s) and with 4 (only "all voters connected 5 s" waits: under
// "a quorum of the resulting voters", the leader and the two older voters are enough).

async function firstAddAccepted(world: CalibrationWorld, leaderURL: string, ordinal: number): Promise<boolean> {
  const infra = await machine(world, ordinal);
  try {
    await world.admin.addLearner([leaderURL], infra.peerURL);
    return true;
  } catch (error) {
    if (error instanceof EtcdAdminError && error.kind === 'UnhealthyCluster') return false;
    throw error;
  }
}

for (const version of listEtcdVersions()) {
  const rule = addRuleFor(version);
  test(`etcd ${version}: a learner add right after a promotion follows the ${rule} rule`, { timeout: 120_000 }, async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'fastplane-add-rule-'));
    const provider = new LocalProcessProvider({ stateDir, addressPrefix: process.env.FASTPLANE_ADDRESS_PREFIX ?? '127.93', findBinary: findEtcdBinary, stopGraceMs: 1500 });
    const tls = provider.clientTls('rule');
    const admin = new Etcd3Admin(tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) });
    const world: CalibrationWorld = { provider, admin, cluster: 'rule', version };
    try {
      const { infra: leader } = await initSample(world, 1);
      await joinSample(world, 2, leader, initToken(1));
      assert.equal(await firstAddAccepted(world, leader.clientURL, 3), false, '2 voters, the 2nd just promoted: refused under either rule');
      await joinSample(world, 3, leader, initToken(1));
      await joinSample(world, 4, leader, initToken(1));
      const accepted = await firstAddAccepted(world, leader.clientURL, 5);
      assert.equal(accepted, rule === 'quorum-of-resulting', `4 voters, the 4th just promoted: ${rule === 'quorum-of-resulting' ? 'accepted' : 'refused'}`);
    } finally {
      await admin.close();
      await provider.destroyCluster('rule');
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
}

// Guarded reconfiguration rests on this: with --strict-reconfig-check=false etcd skips the add rule
// (an add right after a promotion is accepted), while the one-learner limit and the promotion's own
// in-sync check still hold.
for (const version of listEtcdVersions()) {
  test(`etcd ${version} with --strict-reconfig-check=false: no add rule; one learner and promotion in sync still enforced`, { timeout: 120_000 }, async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'fastplane-add-rule-'));
    const provider = new LocalProcessProvider({ stateDir, addressPrefix: process.env.FASTPLANE_ADDRESS_PREFIX ?? '127.93', findBinary: findEtcdBinary, stopGraceMs: 1500 });
    const tls = provider.clientTls('unchecked');
    const admin = new Etcd3Admin(tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) });
    const world: CalibrationWorld = { provider, admin, cluster: 'unchecked', version, strictReconfigCheck: false };
    try {
      const { infra: leader } = await initSample(world, 1);
      await joinSample(world, 2, leader, initToken(1));
      const next = await machine(world, 3);
      const { member } = await admin.addLearner([leader.clientURL], next.peerURL);
      const second = await machine(world, 4);
      await assert.rejects(admin.addLearner([leader.clientURL], second.peerURL), (error: unknown) => error instanceof EtcdAdminError && error.kind === 'TooManyLearners');
      // Never started, so never in sync.
      await assert.rejects(admin.promoteLearner([leader.clientURL], member.id), (error: unknown) => error instanceof EtcdAdminError && error.kind === 'NotInSync');
    } finally {
      await admin.close();
      await provider.destroyCluster('unchecked');
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
}
