import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- plain JS, shared with bin/vmsnap.js
const { sourceStamp, distIsFresh } = require('../../bin/source-stamp.js') as {
  sourceStamp(root: string): string;
  distIsFresh(root: string): boolean;
};

/** bin/vmsnap.js runs dist/ only when it was built from exactly these sources. */
describe('source stamp', () => {
  function tree(): string {
    const root = mkdtempSync(path.join(os.tmpdir(), 'stamp-'));
    for (const d of ['src/cli', 'workflows', 'activities', 'bench']) mkdirSync(path.join(root, d), { recursive: true });
    writeFileSync(path.join(root, 'src/cli/main.ts'), 'export {};\n');
    writeFileSync(path.join(root, 'workflows/index.ts'), 'export {};\n');
    writeFileSync(path.join(root, 'package.json'), '{}\n');
    return root;
  }
  function build(root: string): void {
    mkdirSync(path.join(root, 'dist/src/cli'), { recursive: true });
    writeFileSync(path.join(root, 'dist/src/cli/main.js'), '');
    writeFileSync(path.join(root, 'dist/fleet-workflow-bundle.js'), '');
    writeFileSync(path.join(root, 'dist/build-stamp.json'), JSON.stringify({ stamp: sourceStamp(root) }));
  }

  it('a build of the current sources is fresh; no build is not', () => {
    const root = tree();
    expect(distIsFresh(root)).toBe(false);
    build(root);
    expect(distIsFresh(root)).toBe(true);
  });

  it('a build from before the fleet bundle is not fresh: the fleet worker would have none', () => {
    const root = tree();
    build(root);
    rmSync(path.join(root, 'dist/fleet-workflow-bundle.js'));
    expect(distIsFresh(root)).toBe(false);
  });

  it('any edit to a source, a new source file or package.json makes it stale', () => {
    for (const edit of [
      (r: string) => writeFileSync(path.join(r, 'src/cli/main.ts'), 'export const x = 1;\n'),
      (r: string) => writeFileSync(path.join(r, 'activities/new.ts'), ''),
      (r: string) => writeFileSync(path.join(r, 'package.json'), '{"x":1}\n'),
      (r: string) => writeFileSync(path.join(r, 'bench/load-worker.ts'), ''),
    ]) {
      const root = tree();
      build(root);
      edit(root);
      expect(distIsFresh(root)).toBe(false);
    }
  });

  it('files outside the build (tests, other bench files, docs) do not', () => {
    const root = tree();
    build(root);
    writeFileSync(path.join(root, 'bench/run.ts'), '');
    writeFileSync(path.join(root, 'README.md'), '');
    expect(distIsFresh(root)).toBe(true);
    // The hash is of contents, not times: a copy (a fresh checkout) is still fresh.
    const copy = mkdtempSync(path.join(os.tmpdir(), 'stamp-copy-'));
    cpSync(root, copy, { recursive: true });
    expect(distIsFresh(copy)).toBe(true);
  });
});
