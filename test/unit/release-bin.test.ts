import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/*
 * bin/vmsnap.js as an installed release lays it out (no src/ beside bin/): compiled code or a
 * loud failure, never the tsx fallback a source checkout has. The checkout's node_modules is on
 * the resolution path here (tsx would be found), so a fallback could not hide behind a missing tsx.
 */
const BIN = path.resolve(__dirname, '../../bin');
const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-release-bin-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function layout(name: string, withDist: boolean): string {
  const root = path.join(dir, name);
  mkdirSync(path.join(root, 'bin'), { recursive: true });
  for (const f of ['vmsnap.js', 'source-stamp.js']) copyFileSync(path.join(BIN, f), path.join(root, 'bin', f));
  execFileSync('ln', ['-s', path.resolve(__dirname, '../../node_modules'), path.join(root, 'node_modules')]);
  if (withDist) {
    mkdirSync(path.join(root, 'dist', 'src', 'cli'), { recursive: true });
    writeFileSync(path.join(root, 'dist', 'src', 'cli', 'main.js'), "process.stdout.write('compiled main ran\\n');\n");
  }
  return path.join(root, 'bin', 'vmsnap.js');
}

describe('bin/vmsnap.js in an installed release', () => {
  it('runs dist/ with no build stamp to compare (a release has no sources to hash)', () => {
    const r = spawnSync(process.execPath, [layout('ok', true), '--version'], { encoding: 'utf8' });
    expect(r.stdout).toBe('compiled main ran\n');
    expect(r.status).toBe(0);
  });

  it('without dist/ says the installation is incomplete and exits 1, loading no TypeScript loader', () => {
    const r = spawnSync(process.execPath, [layout('nodist', false), '--version'], { encoding: 'utf8' });
    expect(r.stderr).toMatch(/^vmsnap: this installation is incomplete: .*dist\/src\/cli\/main\.js is missing/);
    expect(r.stderr).not.toMatch(/tsx/);
    expect(r.status).toBe(1);
  });
});
