import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ESLint } from 'eslint';

// The layering of docs/architecture.md is enforced by the project's own lint configuration: these
// lint probe texts as if they were files of the tree, so a back-edge or a circle fails `npm run lint`.
const ROOT = join(import.meta.dirname, '..', '..');
const eslint = new ESLint({ cwd: ROOT });
const LAYER_RULES = new Set(['import-x/no-restricted-paths', 'import-x/no-cycle', 'no-restricted-imports', 'no-restricted-syntax']);

async function problems(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, filePath) });
  return (result?.messages ?? []).filter((m) => m.ruleId !== null && LAYER_RULES.has(m.ruleId)).map((m) => m.message);
}

describe('lint enforces the layers', { timeout: 120_000 }, () => {
  test('an import from a lower layer into a higher one fails, naming what the folder may import', async () => {
    const found = await problems('src/domain/quorum.ts', "import { LeaseKeeper } from '../lease/lease-keeper.ts';\nexport const keeper = LeaseKeeper;\n");
    assert.equal(found.length, 1, found.join('\n'));
    assert.match(found[0] ?? '', /imports flow downward only: src\/domain may import api/);
  });

  test('an adapter importing the planner fails: adapters only implement ports', async () => {
    const found = await problems('src/adapters/state-files.ts', "import { plan } from '../planner/plan.ts';\nexport const planner = plan;\n");
    assert.equal(found.length, 1, found.join('\n'));
    assert.match(found[0] ?? '', /src\/adapters may import api, domain, ports/);
  });

  test('the planner may not import the lease, the executor may', async () => {
    assert.equal((await problems('src/planner/spec.ts', "import type { FencedWriter } from '../lease/fenced-writer.ts';\nexport type W = FencedWriter;\n")).length, 1);
    assert.deepEqual(await problems('src/executor/failpoints.ts', "import type { FencedWriter } from '../lease/fenced-writer.ts';\nexport type W = FencedWriter;\n"), []);
  });

  test('a dynamic import obeys the same layers: a back-edge fails, a lazily loaded adapter in the CLI passes', async () => {
    const found = await problems('src/executor/failpoints.ts', "export const load = async (): Promise<unknown> => import('../care/blocked-error.ts');\n");
    assert.equal(found.length, 1, found.join('\n'));
    assert.match(found[0] ?? '', /imports flow downward only: src\/executor may import /);
    assert.deepEqual(await problems('src/cli/care.ts', "export const load = async (): Promise<unknown> => import('../adapters/etcd/etcd3-admin.ts');\n"), []);
  });

  test('the planner loads no module at run time, not even one it may import statically', async () => {
    const found = await problems('src/planner/spec.ts', "export const load = (): Promise<unknown> => import('../domain/quorum.ts');\n");
    assert.deepEqual(found, ['the planner loads no module at run time']);
  });

  test('one provider importing the other fails, statically or dynamically', async () => {
    const fromLocal = await problems('src/adapters/providers/local/local-machine.ts', "import type { SshProvider } from '../ssh/ssh-provider.ts';\nexport type P = SshProvider;\n");
    assert.equal(fromLocal.length, 1, fromLocal.join('\n'));
    assert.match(fromLocal[0] ?? '', /adapters stay apart: src\/adapters\/providers\/local may import/);
    const fromSsh = await problems('src/adapters/providers/ssh/remote-files.ts', "export const load = async (): Promise<unknown> => import('../local/local-machine.ts');\n");
    assert.equal(fromSsh.length, 1, fromSsh.join('\n'));
    assert.match(fromSsh[0] ?? '', /adapters stay apart: src\/adapters\/providers\/ssh may import/);
  });

  test('a store importing a provider fails; a provider importing the certificates passes', async () => {
    const found = await problems('src/adapters/stores/memory-state-store.ts', "import { writeRemoteFiles } from '../providers/ssh/remote-files.ts';\nexport const write = writeRemoteFiles;\n");
    assert.equal(found.length, 1, found.join('\n'));
    assert.match(found[0] ?? '', /adapters stay apart: src\/adapters\/stores may import \*\.ts, host, etcd$/);
    assert.deepEqual(await problems('src/adapters/providers/ssh/remote-files.ts', "import type { MemberTlsFiles } from '../../pki/pki-files.ts';\nexport type F = MemberTlsFiles;\n"), []);
  });

  test('an import that closes a circle fails', async () => {
    // under-lease.ts imports lease-keeper.ts: lease-keeper.ts importing under-lease.ts closes a circle.
    const found = await problems('src/lease/lease-keeper.ts', "import { underLease } from './under-lease.ts';\nexport const run = underLease;\n");
    assert.ok(found.some((m) => /cycle/i.test(m)), `a circle is reported: ${found.join('\n')}`);
  });
});
