/**
 * `npm run build`: the CLI as one ES module bundle under dist/cli (esbuild), with the lazily loaded
 * commands as chunks beside it. A start then reads a few files instead of resolving and compiling
 * some 400 CommonJS modules one by one: `up` of 3 members spent about 1 s of its 3.5 CPU s in
 * Node's module loader (bench/cli-start.bench.ts measures the start). Type checking is `npm run
 * typecheck`'s; esbuild only strips types.
 *
 * Left outside the bundle, resolved from node_modules at run time: the packages with native addons
 * (better-sqlite3; ssh2 and its optional cpu-features). etcd3 reads its .proto files at run time from
 * `${__dirname}/../proto`: they are copied to dist/proto, one folder above the bundle.
 */
import { build } from 'esbuild';
import { cpSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const DIST = join(ROOT, 'dist');

// CommonJS code in the bundle expects require, __filename and __dirname; in an ES module they are
// made from import.meta.url. Every chunk sits in dist/cli, so __dirname is the same in each.
const BANNER = [
  "import { createRequire as __fastplaneCreateRequire } from 'node:module';",
  "import { fileURLToPath as __fastplaneFileURLToPath } from 'node:url';",
  "import { dirname as __fastplaneDirname } from 'node:path';",
  'const require = __fastplaneCreateRequire(import.meta.url);',
  'const __filename = __fastplaneFileURLToPath(import.meta.url);',
  'const __dirname = __fastplaneDirname(__filename);',
].join('\n');

rmSync(DIST, { recursive: true, force: true });
await build({
  entryPoints: [join(ROOT, 'src', 'cli', 'main.ts')],
  outdir: join(DIST, 'cli'),
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['better-sqlite3', 'ssh2', 'cpu-features'],
  banner: { js: BANNER },
  logLevel: 'warning',
});
const etcd3 = dirname(createRequire(import.meta.url).resolve('etcd3/package.json'));
cpSync(join(etcd3, 'proto'), join(DIST, 'proto'), { recursive: true });
