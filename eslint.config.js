import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';

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

/** Import patterns for every folder of src/ that `folder` may not import. */
function forbiddenFor(folder, allowed) {
  const others = Object.keys(LAYERS).filter((other) => other !== folder && !allowed.includes(other));
  return others.length === 0 ? [] : [{ group: others.map((other) => `**/${other}/**`), message: `imports flow downward only: src/${folder} may import ${allowed.length === 0 ? 'nothing outside itself' : allowed.join(', ')}` }];
}

const impureGlobals = ['process', 'console', 'setTimeout', 'setInterval', 'setImmediate', 'fetch'].map((name) => ({
  name,
  message: 'planner and domain stay pure: no I/O, clock or timers',
}));

const impureSyntax = [
  { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: 'the planner gets `now` as an argument' },
  { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'the planner gets `now` as an argument' },
  { selector: "CallExpression[callee.object.name='Math'][callee.property.name='random']", message: 'the planner is deterministic' },
  { selector: 'AwaitExpression', message: 'the planner is synchronous' },
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
  // The layers, per folder: each imports only the folders listed for it (docs/architecture.md).
  ...Object.entries(LAYERS).map(([folder, allowed]) => ({
    files: [`src/${folder}/**/*.ts`],
    rules: {
      ...(PURE.has(folder) ? { 'no-restricted-globals': ['error', ...impureGlobals], 'no-restricted-syntax': ['error', ...impureSyntax] } : {}),
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...(PURE.has(folder) ? [{ group: ['node:*', 'fs', 'child_process', 'etcd3', 'better-sqlite3', 'pino'], message: 'planner and domain import no node module or adapter' }] : []),
            ...forbiddenFor(folder, allowed),
          ],
        },
      ],
    },
  })),
  {
    files: ['test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }] }],
    },
  },
);
