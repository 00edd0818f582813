import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The layer rules of eslint.config.mjs, run on planted files that break them (and on one that
 * keeps them): a rule that stopped matching — a moved folder left out of a zone, a renamed
 * path — would let the real violation through silently. Only the layer rules run: the
 * type-aware ones need the planted file in the TypeScript project, and are not what is tested.
 */
const LAYER_RULES = new Set(['import-x/no-restricted-paths', '@typescript-eslint/no-restricted-imports', 'no-restricted-imports', 'no-restricted-syntax', 'no-restricted-properties']);
const eslint = new ESLint({
  cwd: ROOT,
  overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
  ruleFilter: ({ ruleId }) => LAYER_RULES.has(ruleId),
});

async function violations(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

describe('lint layer rules, on planted violations', () => {
  it.each([
    ['src/safety/planted.ts', "import { createActivities } from '../../activities';\nexport const x = createActivities;\n", 'adapters never import activities or workflows'],
    ['src/host/planted.ts', "import { consistentSnapshot } from '../../workflows';\nexport const x = consistentSnapshot;\n", 'adapters never import activities or workflows'],
    ['src/libvirt/planted.ts', "import { createActivities } from '../../activities';\nexport const x = createActivities;\n", 'adapters never import activities or workflows'],
    ['src/ceph/planted.ts', "import { createActivities } from '../../activities';\nexport const x = createActivities;\n", 'adapters never import activities or workflows'],
    ['src/retention/planted.ts', "import { removeSourceSnaps } from '../../activities/cleanup';\nexport const x = removeSourceSnaps;\n", 'adapters never import activities or workflows'],
    ['src/model/planted.ts', "import { loadConfig } from '../config';\nexport const x = loadConfig;\n", 'src/model is pure'],
    ['workflows/planted.ts', "import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n", 'workflow code must stay deterministic'],
    ['workflows/planted.ts', "import { createActivities } from '../activities';\nexport const x = createActivities;\n", 'workflows import activity types only'],
    ['src/worker/planted.ts', "import { until } from '../../test/helpers/until';\nexport const x = until;\n", 'production code never imports test/'],
    ['activities/planted.ts', "import { execFile } from 'node:child_process';\nexport const run = (f: string) => execFile(f, { shell: true });\n", 'shell: true builds shell strings'],
    ['workflows/planted.ts', "export const retry = { maximumAttempts: 3, nonRetryableErrorTypes: ['DomainNotFound'] };\n", 'retryability is decided at the activity edge'],
    ['src/cli/planted.ts', "import { execSync } from 'node:child_process';\nexport const x = execSync;\n", 'argv array'],
  ])('%s: %s is refused', async (file, code, expected) => {
    const found = await violations(file, code);
    expect(found.join('\n')).toContain(expected);
  });

  it('an import that keeps the layers passes', async () => {
    expect(await violations('src/safety/planted.ts', "import { monoMs } from '../host/clock';\nexport const x = monoMs;\n")).toEqual([]);
    expect(await violations('workflows/planted.ts', "import type { Activities } from '../activities';\nexport type A = Activities;\n")).toEqual([]);
  });
});
