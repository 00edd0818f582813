import { describe, expect, it } from 'vitest';
import { summarizeLane, writeLoadTargets } from '../../bench/write-load';
import type { WriteLoadSample, WriteLoadVariant } from '../../bench/write-load';
import { kindOf } from '../../bench/process-tree';

const sample = (variant: WriteLoadVariant, mib: number, hostWindowMs: number, probeGapMs: number, preFlushMs?: number): WriteLoadSample => ({
  variant,
  guest: 'g',
  mib,
  round: 0,
  ok: true,
  dirty: { mib, writeMs: 10, dirtyKiB: mib * 1024, writebackKiB: 0 },
  hostWindowMs,
  probeGapMs,
  ...(preFlushMs !== undefined ? { preFlushMs, probeGapWithPreFlushMs: probeGapMs + preFlushMs } : {}),
});

describe('write-load lane report (bench/write-load.ts)', () => {
  const samples = [
    sample('floor', 0, 100, 110),
    sample('floor', 0, 120, 130),
    sample('floor', 64, 300, 320),
    sample('vmsnap-pf', 0, 110, 120, 20),
    sample('vmsnap-pf', 64, 125, 140, 200),
    { ...sample('vmsnap-pf', 64, 0, 0), ok: false, error: 'DomainBusy' },
  ];
  const r = summarizeLane('g', { sizes: [0, 64], rateMiBps: 0 }, samples);

  it('ratios are against the idle floor of the same run; failed runs are counted, not measured', () => {
    const pf64 = r.cells.find((c) => c.variant === 'vmsnap-pf' && c.mib === 64)!;
    expect(pf64).toMatchObject({ ok: 1, failed: 1 });
    expect(pf64.hostRatioToIdleFloor).toBeCloseTo(125 / 110);
    expect(pf64.probeRatioToIdleFloor).toBeCloseTo(140 / 120);
    expect(pf64.preFlush?.p50).toBe(200);
    expect(r.cells.find((c) => c.variant === 'floor' && c.mib === 64)!.preFlush).toBeUndefined();
    expect(r.dirtyAtEnd['64']!.dirtyMiB.p50).toBe(64);
  });

  it('the issue\'s targets on the 64 MiB row: ≤ 1.2× its own idle, below the floor at the same size', () => {
    const t = Object.fromEntries(writeLoadTargets(r).map((x) => [x.name.replace('g: ', ''), x]));
    expect(t['vmsnap window 64 MiB / its idle window (p50)']).toMatchObject({ value: 125 / 110, met: true });
    expect(t['vmsnap probe stall 64 MiB / its idle stall (p50)']).toMatchObject({ value: 140 / 120, met: true });
    expect(t['vmsnap window / floor window at 64 MiB (p50)']).toMatchObject({ value: 125 / 300, met: true });
    expect(writeLoadTargets(summarizeLane('g', { sizes: [0, 64], rateMiBps: 0 }, samples.filter((s) => s.variant === 'floor')))).toEqual([]);
  });
});

describe('the worker\'s process tree (bench/process-tree.ts)', () => {
  it('tells snapshotters and watchdogs apart by their command line', () => {
    expect(kindOf('/usr/bin/node /work/main/dist/src/ceph/snapshotter-child.js')).toBe('snapshotter');
    expect(kindOf('/usr/bin/node --import tsx /work/main/src/safety/watchdog.ts {"domainUuid":"x"}')).toBe('watchdog');
    expect(kindOf('/usr/bin/node /work/main/dist/src/safety/watchdog.js {}')).toBe('watchdog');
    expect(kindOf('rbd snap create x')).toBe('other');
  });
});
