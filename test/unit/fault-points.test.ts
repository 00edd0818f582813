import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { faultPoint, releaseFaultPoint } from '../../src/host/fault-points';

/** The suite's stalls: a worker stalls at an armed point until the pause ends or the suite releases it. */
describe('fault points', () => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const k of ['VMSNAP_FAULT_POINTS', 'VMSNAP_FAULT_DIR', 'VMSNAP_FAULT_PAUSE_MS']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });

  const arm = (pauseMs: number) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-fp-'));
    Object.assign(process.env, { VMSNAP_FAULT_POINTS: 'freeze:after', VMSNAP_FAULT_DIR: dir, VMSNAP_FAULT_PAUSE_MS: String(pauseMs) });
    return dir;
  };

  it('a released stall ends early; the next stall at the point is not released by the old file', async () => {
    const dir = arm(60_000);
    const t0 = Date.now();
    const stalled = faultPoint('freeze:after');
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(path.join(dir, 'freeze_after'))).toBe(true);
    releaseFaultPoint(dir, 'freeze:after');
    await stalled;
    expect(Date.now() - t0).toBeLessThan(2000);

    process.env.VMSNAP_FAULT_PAUSE_MS = '700';
    const t1 = Date.now();
    await faultPoint('freeze:after');
    expect(Date.now() - t1).toBeGreaterThanOrEqual(650);
  });

  it('an unarmed point does not stall', async () => {
    const t0 = Date.now();
    await faultPoint('snapshot:after');
    expect(Date.now() - t0).toBeLessThan(50);
  });
});
