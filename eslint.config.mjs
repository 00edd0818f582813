// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';

// Lab and test support: tests, benchmarks and the demo use it; the product never does.
const SUPPORT = ['./test', './bench', './lab', './support', './scripts'];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'build/**', '.lab/**', 'bench/results/**', 'native/**', 'bin/**', '**/*.mjs', '**/*.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { 'import-x': importX },
    // The layer rules compare resolved files and no-cycle parses them: both must read our .ts sources.
    settings: {
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.json', '.node'] })],
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      'import-x/no-cycle': 'error',
      // One-way dependencies: workflows -> src/model; adapters never reach up into activities or
      // workflows; the product never imports lab or test support.
      'import-x/no-restricted-paths': [
        'error',
        {
          basePath: import.meta.dirname,
          zones: [
            {
              target: './workflows',
              from: './src',
              except: ['./model'],
              message: 'workflow code imports only src/model (it runs in the deterministic sandbox)',
            },
            {
              target: './src/model',
              from: ['./src', './activities', './workflows'],
              except: ['./model'],
              message: 'src/model is pure: workflows import it, so it imports nothing of the rest',
            },
            {
              target: ['./src/libvirt', './src/ceph', './src/host', './src/safety', './src/restore', './src/retention'],
              from: ['./activities', './workflows'],
              message: 'adapters never import activities or workflows',
            },
            {
              target: ['./src', './workflows', './activities'],
              from: SUPPORT,
              message: 'production code never imports test/, bench/, lab/, support/ or scripts/',
            },
            {
              target: ['./support', './bench', './scripts/demo.ts'],
              from: './test',
              message: 'shared lab support lives in support/, not test/',
            },
          ],
        },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Never a shell with interpolated strings: argv arrays only.
      'no-restricted-properties': [
        'error',
        { object: 'child_process', property: 'exec', message: 'use execFile/spawn with an argv array' },
        { object: 'child_process', property: 'execSync', message: 'use execFileSync/spawnSync with an argv array' },
      ],
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: 'child_process', importNames: ['exec', 'execSync'], message: 'use execFile/spawn with an argv array' },
            { name: 'node:child_process', importNames: ['exec', 'execSync'], message: 'use execFile/spawn with an argv array' },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "Property[key.name='shell'][value.value=true]", message: 'shell: true builds shell strings; pass argv arrays' },
      ],
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O.
    files: ['workflows/**/*.ts', 'src/model/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: "Property[key.name='shell'][value.value=true]", message: 'shell: true builds shell strings; pass argv arrays' },
        // Whether a failure can be retried is decided once, where it is made (activities/failures.ts).
        { selector: "Property[key.name='nonRetryableErrorTypes']", message: 'retryability is decided at the activity edge (activities/failures.ts), not by a list in a retry policy' },
      ],
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [{ name: '@temporalio/activity', message: 'workflows do not import activity code' }],
          patterns: [
            { group: ['node:*', 'fs', 'child_process', 'net', 'http', 'os', 'path'], message: 'workflow code must stay deterministic' },
            { group: ['@temporalio/*', '!@temporalio/workflow', '!@temporalio/common'], message: 'workflow code imports only @temporalio/workflow and @temporalio/common' },
            // Types only: proxyActivities<Activities> needs them, the bundle must not.
            { group: ['**/activities', '**/activities/**'], allowTypeImports: true, message: 'workflows import activity types only (import type)' },
          ],
        },
      ],
    },
  },
);
