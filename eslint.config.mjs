// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'build/**', '.lab/**', 'bench/results/**', 'native/**', 'bin/**', '**/*.mjs', '**/*.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
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
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: '@temporalio/activity', message: 'workflows do not import activity code' }],
          patterns: [{ group: ['node:*', 'fs', 'child_process', 'net', 'http', 'os', 'path'], message: 'workflow code must stay deterministic' }],
        },
      ],
    },
  },
);
