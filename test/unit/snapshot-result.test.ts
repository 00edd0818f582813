import { describe, expect, it } from 'vitest';
import { freezeWindow, quiesceRecord, reusedResult, snapshotResult, windowSteps, type Capture } from '../../src/model/snapshot-result';
import type { InspectResult, SnapshotPlan } from '../../src/model/types';

const plan: SnapshotPlan = {
  runKey: 'k1',
  domain: { name: 'vm1', uuid: '11111111-2222-4333-8444-555555555555' },
  disks: [
    { target: 'vda', source: { pool: 'vms', image: 'vm1-vda' }, sourceSnap: 'vmsnap-k1', image: { pool: 'images', image: 'vm1-vda-k1' } },
    { target: 'vdb', source: { pool: 'vms', image: 'vm1-vdb' }, sourceSnap: 'vmsnap-k1' },
  ],
  skipped: [{ target: 'hdc', reason: 'cdrom' }],
  freeze: true,
  clone: true,
};
const found = { host: 'h1', fsid: 'f5' } as InspectResult;
const run = { workflowId: 'wf1', plan, found, steps: { inspect: 12 } };

const frozen: Capture = {
  quiesced: true,
  quiesceReason: 'guest agent froze 2 filesystem(s) for the snapshot',
  frozenFilesystems: 2,
  freeze: { frozenFilesystems: 2, startedAt: 1_750_000_000_000.25, returnedAt: 1_750_000_000_005.3 },
  snapshot: { startedAt: 1_750_000_000_006, returnedAt: 1_750_000_000_016.44, perDiskMs: { vda: 9, vdb: 10.4 } },
  thaw: { thawedFilesystems: 2, startedAt: 1_750_000_000_017, returnedAt: 1_750_000_000_020.1 },
};
const crashConsistent: Capture = {
  quiesced: false,
  quiesceReason: 'quiesce policy is skip',
  frozenFilesystems: 0,
  snapshot: { startedAt: 50, returnedAt: 62, perDiskMs: { vda: 12, vdb: 12 } },
};

describe('the freeze window in the result', () => {
  it('freeze start → thaw return, split into calls and gaps, to 0.1 ms', () => {
    expect(freezeWindow(frozen)).toEqual({ freezeWindowMs: 19.9, freezeBreakdownMs: { freeze: 5.1, snapshot: 10.4, thaw: 3.1, gaps: 1.3 } });
    expect(windowSteps(frozen)).toEqual({ freeze: 5.1, snapshot: 10.4, thaw: 3.1 });
  });

  it('the window ends when the thaw call returned, not when the status proof came back', () => {
    const proven = { ...frozen, thaw: { ...frozen.thaw!, thawedAt: 1_750_000_000_018.5, returnedAt: 1_750_000_000_030 } };
    expect(freezeWindow(proven)).toEqual({ freezeWindowMs: 18.3, freezeBreakdownMs: { freeze: 5.1, snapshot: 10.4, thaw: 1.5, gaps: 1.3 } });
  });

  it('nothing frozen: no window, only the snapshot step', () => {
    expect(freezeWindow(crashConsistent)).toEqual({ freezeWindowMs: null, freezeBreakdownMs: undefined });
    expect(windowSteps(crashConsistent)).toEqual({ snapshot: 12 });
  });
});

describe('what each disk records', () => {
  it('a quiesced capture names its freeze by the freeze call’s start', () => {
    expect(quiesceRecord(frozen)).toEqual({ quiesced: true, frozenFilesystems: 2, quiesceReason: frozen.quiesceReason, frozenAt: '2025-06-15T15:06:40.000Z' });
  });

  it('a capture that froze but is not quiesced records no freeze time', () => {
    const notHeld = { ...frozen, quiesced: false, frozenFilesystems: 0, quiesceReason: 'the host guard thawed the guest' };
    expect(quiesceRecord(notHeld)).toEqual({ quiesced: false, frozenFilesystems: 0, quiesceReason: 'the host guard thawed the guest' });
  });
});

describe('snapshotResult', () => {
  it('assembles the run, one disk result per planned disk in order', () => {
    const r = snapshotResult(run, frozen, [{ bytes: 64, sha256: 'ab' }, undefined]);
    expect(r).toEqual({
      workflowId: 'wf1',
      domain: plan.domain,
      host: 'h1',
      quiesced: true,
      quiesceReason: frozen.quiesceReason,
      frozenFilesystems: 2,
      freezeWindowMs: 19.9,
      frozenAt: '2025-06-15T15:06:40.000Z',
      freezeBreakdownMs: { freeze: 5.1, snapshot: 10.4, thaw: 3.1, gaps: 1.3 },
      disks: [
        {
          target: 'vda',
          source: 'vms/vm1-vda',
          location: 'rbd://f5/images/vm1-vda-k1/snap',
          snapshot: 'vms/vm1-vda@vmsnap-k1',
          image: 'images/vm1-vda-k1',
          contentBytes: 64,
          sha256: 'ab',
        },
        { target: 'vdb', source: 'vms/vm1-vdb', location: 'rbd://f5/vms/vm1-vdb/vmsnap-k1', snapshot: 'vms/vm1-vdb@vmsnap-k1' },
      ],
      skippedDisks: plan.skipped,
      stepsMs: run.steps,
    });
  });

  it('the steps object is the workflow’s own: steps timed after assembly still show', () => {
    const steps: Record<string, number> = {};
    const r = snapshotResult({ ...run, steps }, crashConsistent, [undefined, undefined]);
    steps['finalize:vda'] = 3;
    expect(r.stepsMs).toEqual({ 'finalize:vda': 3 });
    expect(r.frozenAt).toBeUndefined();
  });
});

it('reusedResult: what the records say, no window, marked reused', () => {
  const r = reusedResult(run, { quiesced: true, quiesceReason: 'records agree', frozenFilesystems: 2, frozenAt: '2025-01-01T00:00:00.000Z' });
  expect(r).toMatchObject({ quiesced: true, frozenFilesystems: 2, frozenAt: '2025-01-01T00:00:00.000Z', freezeWindowMs: null, reusedExisting: true });
  expect(r.disks.map((d) => d.target)).toEqual(['vda', 'vdb']);
  expect(r.disks[0]).not.toHaveProperty('contentBytes');
});
