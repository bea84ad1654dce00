import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ESLint } from 'eslint';

// The layering of docs/architecture.md is enforced by the project's own lint configuration: these
// lint probe texts as if they were files of the tree, so a back-edge or a circle fails `npm run lint`.
const ROOT = join(import.meta.dirname, '..', '..');
const eslint = new ESLint({ cwd: ROOT });

async function problems(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, filePath) });
  return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports' || m.ruleId === 'import-x/no-cycle').map((m) => m.message);
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

  test('an import that closes a circle fails', async () => {
    // under-lease.ts imports lease-keeper.ts: lease-keeper.ts importing under-lease.ts closes a circle.
    const found = await problems('src/lease/lease-keeper.ts', "import { underLease } from './under-lease.ts';\nexport const run = underLease;\n");
    assert.ok(found.some((m) => /cycle/i.test(m)), `a circle is reported: ${found.join('\n')}`);
  });
});
