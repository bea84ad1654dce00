import assert from 'node:assert/strict';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { statusOf, type CliEnv } from './cli.ts';
import { ClusterWatch, type ClusterSample } from './cluster-watch.ts';
import { kvClientFor } from './etcd-direct.ts';

/**
 * One etcd 3.6 member with `keys` values of 4 KiB under `prefix` (enough that the joiners take a
 * while to catch up, so several overlap), then grown to five machines while a watch samples the
 * member list. Returns the grown cluster's status and the samples.
 */
export async function growWithLearners(env: CliEnv, name: string, options: { keys: number; prefix: string }): Promise<{ after: ControlPlaneStatusDocument; samples: ClusterSample[] }> {
  const first = await env.run(['up', '--name', name, '--replicas', '1', '--version', '3.6.17', '--timeout', '90s', '-o', 'json']);
  assert.equal(first.code, 0, first.stderr);
  const one = statusOf(first.stdout);
  const kv = kvClientFor(one.status);
  const value = 'v'.repeat(4096);
  try {
    for (let i = 0; i < options.keys; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => kv.put(`${options.prefix}${String(i + j).padStart(5, '0')}`).value(value)));
    }
  } finally {
    kv.close();
  }
  const watch = new ClusterWatch(one.status);
  watch.start();
  let scaled;
  try {
    scaled = await env.run(['up', '--name', name, '--replicas', '5', '--provisioning-delay', '2s', '--timeout', '180s', '-o', 'json']);
  } finally {
    await watch.stop();
  }
  assert.equal(scaled.code, 0, scaled.stderr);
  return { after: statusOf(scaled.stdout), samples: watch.samples };
}
