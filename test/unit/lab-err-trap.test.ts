import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const LIB = path.resolve(__dirname, '../../lab/lib.sh');

/** A lab script that dies under `set -e` says where: lab/lib.sh's ERR trap. */
describe('lab/lib.sh ERR trap', () => {
  it('names the script, line, command, exit status (each stage of a pipeline) and the function stack', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'err-trap-'));
    const script = path.join(dir, 'component.sh');
    writeFileSync(
      script,
      [
        '#!/usr/bin/env bash',
        'set -euo pipefail',
        `source ${JSON.stringify(LIB)}`,
        'WHO=component',
        'prune() { printf "a\\n" | grep -v a | cat; }', // line 5: the middle stage selects nothing
        'up() { prune; echo unreachable; }',
        'up',
        '',
      ].join('\n'),
    );
    const r = spawnSync('bash', [script], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stdout).not.toContain('unreachable');
    expect(r.stderr).toContain(`[component] FAILED: ${script}:5: \`cat\` exited 1 (pipeline statuses: 0 1 0); in: prune@component.sh:5 up@component.sh:6 main@component.sh:7`);
  });

  it('says nothing for failures a script handles (conditions, || lists)', () => {
    const r = spawnSync('bash', ['-c', `set -euo pipefail; source ${JSON.stringify(LIB)}; if false; then :; fi; false || true; grep -q x <<<y || echo handled`], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('handled\n');
    expect(r.stderr).toBe('');
  });
});
