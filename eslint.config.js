import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The layers: the folders each folder of src/ may import, besides itself. Lower layers never import
 * higher ones: api <- domain <- ports <- lease, planner <- cluster <- executor, care <- reconciler
 * <- app, controller <- cli. Adapters implement ports and import nothing above them; sim, bench and cli put the parts
 * together (composition roots), report renders what bench measured.
 */
export const LAYERS = {
  api: [],
  domain: ['api'],
  ports: ['api', 'domain'],
  lease: ['api', 'domain', 'ports'],
  planner: ['api', 'domain', 'ports'],
  cluster: ['api', 'domain', 'ports', 'lease', 'planner'],
  executor: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster'],
  reconciler: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster', 'executor'],
  care: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster'],
  app: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster', 'executor', 'reconciler', 'care'],
  controller: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster', 'executor', 'reconciler', 'app'],
  adapters: ['api', 'domain', 'ports'],
  sim: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster', 'executor', 'reconciler', 'adapters'],
  bench: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster', 'executor', 'reconciler', 'adapters'],
  report: ['api', 'domain', 'bench'],
  cli: ['api', 'domain', 'ports', 'lease', 'planner', 'cluster', 'executor', 'reconciler', 'care', 'app', 'controller', 'adapters', 'sim', 'bench', 'report'],
};
const PURE = new Set(['planner', 'domain']);

/**
 * The parts of src/adapters and which other parts each may import, besides itself. A part is a folder
 * (`etcd`) or the files directly in one (`*.ts`, `providers/*.ts`). Providers build on the etcd tools,
 * the certificates and the host (a member's flags name its certificate files); `providers/*.ts` (the
 * registry, what both providers share) is the one place that knows both providers, so neither imports
 * the other, and no store imports a provider. The local provider keeps its records in a memory store
 * when it is given none.
 */
const ADAPTERS = {
  '*.ts': ['host'],
  host: ['pki'],
  etcd: ['*.ts', 'host'],
  pki: ['*.ts'],
  stores: ['*.ts', 'host', 'etcd'],
  kubernetes: ['*.ts', 'host', 'pki'],
  endpoint: ['*.ts', 'host'],
  'providers/*.ts': ['*.ts', 'host', 'pki', 'kubernetes', 'endpoint', 'providers/local', 'providers/ssh'],
  'providers/local': ['*.ts', 'host', 'etcd', 'pki', 'stores', 'kubernetes', 'endpoint', 'providers/*.ts'],
  'providers/ssh': ['*.ts', 'host', 'etcd', 'pki', 'kubernetes', 'endpoint', 'providers/*.ts'],
};

// A folder missing from the tables would be neither checked nor protected: say so instead.
const foldersOf = (dir) => readdirSync(join(import.meta.dirname, dir), { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
const unlisted = [
  ...foldersOf('src').filter((folder) => !(folder in LAYERS)).map((folder) => `src/${folder} is not in LAYERS`),
  ...foldersOf('src/adapters').flatMap((folder) => (folder === 'providers' ? foldersOf('src/adapters/providers').map((sub) => `providers/${sub}`) : [folder])).filter((part) => !(part in ADAPTERS)).map((part) => `src/adapters/${part} is not in ADAPTERS`),
];
if (unlisted.length > 0) throw new Error(`eslint.config.js: ${unlisted.join('; ')}`);

const adapterGlob = (part) => (part.endsWith('.ts') ? `src/adapters/${part}` : `src/adapters/${part}/**`);

/**
 * One zone per importing folder: what it may not import. `import-x/no-restricted-paths` resolves every
 * import, static or dynamic (`await import(...)`), so lazily loaded modules obey the same layers.
 */
const zones = [
  ...Object.entries(LAYERS).map(([folder, allowed]) => ({
    target: `src/${folder}/**`,
    from: Object.keys(LAYERS).filter((other) => other !== folder && !allowed.includes(other)).map((other) => `src/${other}/**`),
    message: `imports flow downward only: src/${folder} may import ${allowed.length === 0 ? 'nothing outside itself' : allowed.join(', ')}`,
  })),
  ...Object.entries(ADAPTERS).map(([part, allowed]) => ({
    target: adapterGlob(part),
    from: Object.keys(ADAPTERS).filter((other) => other !== part && !allowed.includes(other)).map(adapterGlob),
    message: `adapters stay apart: src/adapters/${part} may import ${allowed.length === 0 ? 'no other adapter' : allowed.join(', ')}`,
  })),
].filter((zone) => zone.from.length > 0);

const impureGlobals = ['process', 'console', 'setTimeout', 'setInterval', 'setImmediate', 'fetch'].map((name) => ({
  name,
  message: 'planner and domain stay pure: no I/O, clock or timers',
}));

const impureSyntax = [
  { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: 'the planner gets `now` as an argument' },
  { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'the planner gets `now` as an argument' },
  { selector: "CallExpression[callee.object.name='Math'][callee.property.name='random']", message: 'the planner is deterministic' },
  { selector: 'AwaitExpression', message: 'the planner is synchronous' },
  { selector: 'ImportExpression', message: 'the planner loads no module at run time' },
];

export default tseslint.config(
  { ignores: ['node_modules/**', '.cache/**', 'dist/**', 'eslint.config.js', 'bin/**'] },
  eslint.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  { plugins: { 'import-x': importX }, settings: { 'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts'] })], 'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] }, 'import-x/extensions': ['.ts'] } },
  // No import circle anywhere in the product.
  { files: ['src/**/*.ts'], rules: { 'import-x/no-cycle': 'error' } },
  // The layers (docs/architecture.md) and the parts of src/adapters, for static and dynamic imports alike.
  { files: ['src/**/*.ts'], rules: { 'import-x/no-restricted-paths': ['error', { zones, basePath: import.meta.dirname }] } },
  // The planner and the domain stay pure.
  {
    files: [...PURE].map((folder) => `src/${folder}/**/*.ts`),
    rules: {
      'no-restricted-globals': ['error', ...impureGlobals],
      'no-restricted-syntax': ['error', ...impureSyntax],
      'no-restricted-imports': ['error', { patterns: [{ group: ['node:*', 'fs', 'child_process', 'etcd3', 'better-sqlite3', 'pino'], message: 'planner and domain import no node module or adapter' }] }],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }] }],
    },
  },
);
