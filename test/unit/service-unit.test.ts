import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../..');

describe('deploy/vmsnap-worker.service', () => {
  const unit = readFileSync(path.join(ROOT, 'deploy/vmsnap-worker.service'), 'utf8');
  it('stops and restarts only the worker process, so the freeze guard watchdogs survive', () => {
    expect(unit).toMatch(/^KillMode=process$/m);
  });
  it('is the unit the README shows', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const shown = /```ini\n\[Service\]\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(shown).toBeTruthy();
    const service = /\[Service\]\n([\s\S]*?)\n\n/.exec(unit)?.[1];
    expect(shown!.trim()).toBe(service!.trim());
  });
});
