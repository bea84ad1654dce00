import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';

const impureGlobals = ['process', 'console', 'setTimeout', 'setInterval', 'setImmediate', 'fetch'].map((name) => ({
  name,
  message: 'planner and domain stay pure: no I/O, clock or timers',
}));

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
  {
    files: ['src/planner/**/*.ts', 'src/domain/**/*.ts', 'src/api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/adapters/**', '**/executor/**', '**/reconciler/**', '**/cli/**', '**/sim/**'], message: 'imports flow downward only' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/planner/**/*.ts', 'src/domain/**/*.ts'],
    rules: {
      'no-restricted-globals': ['error', ...impureGlobals],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*', 'fs', 'child_process', 'etcd3', 'better-sqlite3', 'pino'], message: 'planner and domain import no node module or adapter' },
            { group: ['**/adapters/**', '**/executor/**', '**/reconciler/**', '**/cli/**', '**/sim/**'], message: 'imports flow downward only' },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: 'the planner gets `now` as an argument' },
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'the planner gets `now` as an argument' },
        { selector: "CallExpression[callee.object.name='Math'][callee.property.name='random']", message: 'the planner is deterministic' },
        { selector: 'AwaitExpression', message: 'the planner is synchronous' },
      ],
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
