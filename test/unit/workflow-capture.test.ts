import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures';
import { StepError } from '../../activities/step-error';
import { FailureType, FREEZE_NOT_SENT } from '../../src/model/failures';
import { SA } from '../../src/model/search-attributes';
import { agentError, FakeHost } from '../../support/fast/fake-host';
import { failureOf } from '../helpers/failure-of';
import { useWorkflowLane } from '../helpers/workflow-lane';

/*
 * Every branch of captureDisks (workflows/capture.ts) on the real workflow code, in snapshot-only
 * mode so the freeze window is all there is: the quiesce policies, a freeze that fails or lands
 * late, a foreign freeze, the host guard, a thaw that fails — and whether `quiesced` tells the truth.
 */
// Scenarios share nothing (own domain, lock and workflow id), so they run side by side.
const laneOf = useWorkflowLane();

const keepSnapshot = { target: { clone: false } } as const;
let n = 0;
const host = () => new FakeHost(`vm-capture-${++n}`);

describe.concurrent('a freeze that holds', () => {
  it.each(['require', 'prefer'] as const)('quiesce %s: quiesced, with the window and its breakdown from the activities’ clocks', async (quiesce) => {
    const h = host();
    const run = await laneOf().start(h, { quiesce, ...keepSnapshot });
    const r = await run.result();

    expect(h.steps()).toEqual(['inspectDomain', 'checkTargets', 'endPredecessorFreeze', 'prepareSnapshots', 'freezeGuest', 'snapshotDisks', 'thawGuest', 'finalizeDisk', 'finalizeDisk']);
    expect(r).toMatchObject({ quiesced: true, frozenFilesystems: 2, quiesceReason: 'guest agent froze 2 filesystem(s) for the snapshot' });
    // freeze 1→6, snapshot 7→17, thaw 18→21 (ms after the fake clock's epoch): 2 ms between calls.
    const t0 = 1_750_000_000_000;
    expect(r.freezeWindowMs).toBe(20);
    expect(r.freezeBreakdownMs).toEqual({ freeze: 5, snapshot: 10, thaw: 3, gaps: 2 });
    expect(r.frozenAt).toBe(new Date(t0 + 1).toISOString());
    expect(r.stepsMs).toMatchObject({ freeze: 5, snapshot: 10, thaw: 3 });
    expect(h.callsOf('thawGuest')).toEqual([expect.objectContaining({ thawedBy: 'workflow' })]);
    expect(h.callsOf('finalizeDisk')).toEqual(
      ['vda', 'vdb'].map(() => expect.objectContaining({ quiesced: true, frozenFilesystems: 2, frozenAt: r.frozenAt })),
    );
    expect((await run.describe()).typedSearchAttributes.get(SA.quiesced)).toBe(true);
    expect(h.frozen).toBe(0);
    expect([...h.snaps]).toHaveLength(2); // snapshot-only mode keeps them: they are the result
    expect(await laneOf().lockState(h)).toBe('COMPLETED');
  });
});

describe.concurrent('no freeze planned', () => {
  it('quiesce skip: no freeze, no thaw, crash-consistent and says so', async () => {
    const h = host();
    const r = await (await laneOf().start(h, { quiesce: 'skip', ...keepSnapshot })).result();
    expect(h.steps()).not.toContain('freezeGuest');
    expect(h.steps()).not.toContain('thawGuest');
    expect(h.steps()).not.toContain('endPredecessorFreeze');
    expect(r).toMatchObject({ quiesced: false, quiesceReason: 'quiesce policy is skip', frozenFilesystems: 0, freezeWindowMs: null });
    expect(r.freezeBreakdownMs).toBeUndefined();
    expect(r.frozenAt).toBeUndefined();
  });

  it.each([
    ['an agent that does not answer', { configured: true, responding: false, error: 'timed out' }, 'guest agent does not answer guest-ping (timed out)'],
    ['no agent channel', { configured: false, responding: false }, 'domain has no guest agent channel'],
  ])('quiesce prefer, %s: snapshots crash-consistent without trying to freeze', async (_what, agent, reason) => {
    const h = host();
    h.agent = agent;
    const r = await (await laneOf().start(h, { quiesce: 'prefer', ...keepSnapshot })).result();
    expect(h.steps()).not.toContain('freezeGuest');
    expect(r).toMatchObject({ quiesced: false, quiesceReason: reason, frozenFilesystems: 0 });
    expect(h.callsOf('finalizeDisk')[0]).toMatchObject({ quiesced: false, quiesceReason: reason });
  });

  it('quiesce require, an agent that does not answer: fails before the lock, nothing touched', async () => {
    const h = host();
    h.agent = { configured: true, responding: false };
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.QuiesceUnavailable);
    expect(h.steps()).toEqual(['inspectDomain']);
    expect(await laneOf().lockState(h)).toBe('none');
  });
});

describe.concurrent('a freeze that fails', () => {
  // The worst case: the guest froze, but the answer was an error (agent timeout).
  const landedThenFailed = (h: FakeHost) =>
    h.script('freezeGuest', async (_req, real) => {
      await real();
      throw agentError('agent timed out');
    });

  it('quiesce require: FreezeFailed; the late freeze is thawed (with a late-freeze watch) and nothing is kept', async () => {
    const h = landedThenFailed(host());
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', lateSnapshotWatchMs: 4321, ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.FreezeFailed);
    expect(f.message).toContain('agent timed out');
    expect(h.after('freezeGuest')).toEqual(['thawGuest', 'removeSourceSnaps']);
    expect(h.callsOf('thawGuest')).toEqual([expect.objectContaining({ thawedBy: 'compensation', lateFreezeWatchMs: 4321 })]);
    expect(h.leftovers()).toEqual([]);
  });

  it('quiesce prefer: thaws the late freeze before the snapshot, then goes on crash-consistent and says why', async () => {
    const h = landedThenFailed(host());
    let frozenAtSnapshot = -1;
    h.script('snapshotDisks', (_req, real) => {
      frozenAtSnapshot = h.frozen;
      return real();
    });
    const r = await (await laneOf().start(h, { quiesce: 'prefer', lateSnapshotWatchMs: 4321, ...keepSnapshot })).result();
    expect(h.after('freezeGuest')).toEqual(['thawGuest', 'snapshotDisks', 'finalizeDisk', 'finalizeDisk']);
    expect(frozenAtSnapshot).toBe(0);
    expect(h.callsOf('thawGuest')).toEqual([expect.objectContaining({ thawedBy: 'compensation', lateFreezeWatchMs: 4321 })]);
    expect(r).toMatchObject({ quiesced: false, quiesceReason: 'freeze failed: agent timed out', frozenFilesystems: 0, freezeWindowMs: null });
    expect(h.callsOf('finalizeDisk')[0]).toMatchObject({ quiesced: false });
  });

  it('quiesce require, the agent says quiesce is unavailable: QuiesceUnavailable', async () => {
    const h = host().script('freezeGuest', async () => {
      throw ApplicationFailure.nonRetryable('guest agent is not connected', FailureType.QuiesceUnavailable);
    });
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.QuiesceUnavailable);
    expect(f.message).toBe('quiesce required but guest agent is not connected');
    expect(h.leftovers()).toEqual([]);
  });

  it.each(['require', 'prefer'] as const)('quiesce %s, the guest is frozen by someone else: GuestFrozenByOther, and their freeze is left alone', async (quiesce) => {
    const h = host();
    h.frozen = 3;
    h.frozenBy = 'other';
    const f = await failureOf((await laneOf().start(h, { quiesce, ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.GuestFrozenByOther);
    expect(h.steps()).not.toContain('thawGuest');
    expect(h.after('freezeGuest')).toEqual(['removeSourceSnaps']);
    expect({ frozen: h.frozen, by: h.frozenBy }).toEqual({ frozen: 3, by: 'other' });
    expect(h.leftovers()).toEqual([]);
  });
});

describe.concurrent('a freeze step that fails before the freeze is sent (issue 25 #8)', () => {
  // As the real freezeGuest reports it (activities/freeze.ts): through the failure edge, marked.
  // Meanwhile an operator froze the guest: a thaw, a late-freeze watch or a hand-off would end it.
  const notSent = (h: FakeHost, what: string, cause: Error) =>
    h.script('freezeGuest', async () => {
      h.frozen = 3;
      h.frozenBy = 'other';
      throw toFailure(new StepError(`prepare freeze of ${h.domain.name}`, new Error(`${what}: ${cause.message}`), undefined, FREEZE_NOT_SENT));
    });

  it.each([
    ['its status check', 'guest-fsfreeze-status', new Error('agent did not answer')],
    ['its guard arming', 'arm the freeze guard', new Error('ENOSPC writing the journal')],
  ])('quiesce require, %s: fails, with no thaw, no late-freeze watch and no hand-off', async (_what, step, cause) => {
    const h = notSent(host(), step, cause);
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', lateSnapshotWatchMs: 4321, ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.FreezeFailed);
    expect(f.message).toContain(cause.message);
    expect(h.steps()).not.toContain('thawGuest');
    expect(h.after('freezeGuest')).toEqual(['removeSourceSnaps']);
    expect({ frozen: h.frozen, by: h.frozenBy }).toEqual({ frozen: 3, by: 'other' });
    expect(h.leftovers()).toEqual([]);
  });

  it('quiesce prefer, its guard arming: crash-consistent and says why, nothing thawed', async () => {
    const h = notSent(host(), 'arm the freeze guard', new Error('ENOSPC writing the journal'));
    h.script('snapshotDisks', async (_req, real) => {
      // The operator thaws before the snapshot; the run must still not have thawed anything itself.
      h.frozen = 0;
      h.frozenBy = undefined;
      return real();
    });
    const r = await (await laneOf().start(h, { quiesce: 'prefer', lateSnapshotWatchMs: 4321, ...keepSnapshot })).result();
    expect(h.steps()).not.toContain('thawGuest');
    expect(h.after('freezeGuest')).toEqual(['snapshotDisks', 'finalizeDisk', 'finalizeDisk']);
    expect(r).toMatchObject({ quiesced: false, frozenFilesystems: 0, freezeWindowMs: null });
    expect(r.quiesceReason).toContain('ENOSPC writing the journal');
  });

  it('the VM left before it was frozen: DomainMoved, nothing thawed', async () => {
    const h = host().script('freezeGuest', async () => {
      throw toFailure(new StepError(`prepare freeze of ${h.domain.name}`, ApplicationFailure.nonRetryable('Domain not found', FailureType.DomainNotFound), undefined, FREEZE_NOT_SENT));
    });
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.DomainMoved);
    expect(h.steps()).not.toContain('thawGuest');
  });
});

describe.concurrent('a freeze that froze nothing', () => {
  it('quiesce require: thawed, QuiesceUnavailable', async () => {
    const h = host();
    h.filesystems = 0;
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.QuiesceUnavailable);
    expect(f.message).toContain('froze 0 filesystems');
    expect(h.after('freezeGuest')).toEqual(['thawGuest', 'removeSourceSnaps']);
    expect(h.leftovers()).toEqual([]);
  });

  it('quiesce prefer: thawed, then crash-consistent', async () => {
    const h = host();
    h.filesystems = 0;
    const r = await (await laneOf().start(h, { quiesce: 'prefer', ...keepSnapshot })).result();
    expect(h.after('freezeGuest')).toEqual(['thawGuest', 'snapshotDisks', 'finalizeDisk', 'finalizeDisk']);
    expect(r).toMatchObject({ quiesced: false, quiesceReason: 'guest agent froze 0 filesystems', freezeWindowMs: null });
  });
});

describe.concurrent('a freeze that did not hold until the thaw', () => {
  const cases = [
    {
      what: 'the host guard fired',
      arrange: (h: FakeHost) => h.script('thawGuest', async (_req, real) => ({ ...(await real()), thawedFilesystems: 0, guardFiredAt: h.now })),
      failure: FailureType.FreezeDeadlineExceeded,
      reason: 'the host guard thawed the guest',
    },
    {
      what: 'the window outlived the deadline (monotonic clock)',
      arrange: (h: FakeHost) =>
        h.script('snapshotDisks', async (_req, real) => {
          h.advance(10_001);
          return real();
        }),
      failure: FailureType.FreezeDeadlineExceeded,
      reason: 'past its 10000 ms deadline (monotonic clock)',
    },
    {
      what: 'someone else thawed inside the window',
      arrange: (h: FakeHost) =>
        h.script('snapshotDisks', async (_req, real) => {
          h.frozen = 0;
          h.frozenBy = undefined;
          return real();
        }),
      failure: FailureType.FreezeInterrupted,
      reason: "the run's own thaw thawed 0 of the 2 filesystem(s)",
    },
  ];

  it.each(cases)('quiesce require, $what: $failure, the snapshot is removed', async ({ arrange, failure, reason }) => {
    const h = host();
    arrange(h);
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    expect(f.type).toBe(failure);
    expect(f.message).toContain(reason);
    // Thawed by the workflow already: the thaw compensation has nothing left to do.
    expect(h.after('thawGuest')).toEqual(['removeSourceSnaps']);
    expect(h.leftovers()).toEqual([]);
  });

  it.each(cases)('quiesce prefer, $what: kept, but not called quiesced', async ({ arrange, reason }) => {
    const h = host();
    arrange(h);
    const run = await laneOf().start(h, { quiesce: 'prefer', ...keepSnapshot });
    const r = await run.result();
    expect(r).toMatchObject({ quiesced: false, frozenFilesystems: 0 });
    expect(r.quiesceReason).toContain(reason);
    expect(r.frozenAt).toBeUndefined();
    expect(h.callsOf('finalizeDisk')[0]).toMatchObject({ quiesced: false, frozenFilesystems: 0 });
    expect(h.callsOf('finalizeDisk')[0]!.frozenAt).toBeUndefined();
    expect((await run.describe()).typedSearchAttributes.get(SA.quiesced)).toBe(false);
  });
});

describe.concurrent('a snapshot that fails', () => {
  it('SnapshotFailed: thawed by the compensation, no late-snapshot watch', async () => {
    const h = host().script('snapshotDisks', async () => {
      throw ApplicationFailure.nonRetryable('rbd_snap_create: EIO', FailureType.SnapshotFailed);
    });
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.SnapshotFailed);
    expect(h.after('snapshotDisks')).toEqual(['thawGuest', 'removeSourceSnaps']);
    expect(h.callsOf('thawGuest')[0]).toMatchObject({ thawedBy: 'compensation' });
    expect(h.callsOf('thawGuest')[0]!.lateFreezeWatchMs).toBeUndefined();
    expect(h.callsOf('removeSourceSnaps')[0]).toMatchObject({ watchLateMs: 0 });
  });

  it('SnapshotTimeout: the cleanup watches for a snapshot that lands late', async () => {
    const h = host().script('snapshotDisks', async (_req, real) => {
      await real(); // the lock owner woke up and created it after all
      throw ApplicationFailure.nonRetryable('snapshot did not finish within 8000 ms', FailureType.SnapshotTimeout);
    });
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', lateSnapshotWatchMs: 4321, ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.SnapshotTimeout);
    expect(h.callsOf('removeSourceSnaps')[0]).toMatchObject({ watchLateMs: 4321 });
    expect(h.leftovers()).toEqual([]);
  });
});

describe.concurrent('a thaw that fails', () => {
  const thawFails = (h: FakeHost, times: number) =>
    h.script('thawGuest', async (_req, real, attempt) => {
      if (attempt <= times) throw agentError('agent did not answer guest-fsfreeze-thaw', FailureType.ThawFailed);
      return real();
    });

  it('after the workflow’s own 3 tries, the compensation thaws; the run fails, nothing kept', async () => {
    const h = thawFails(host(), 3);
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    expect(f.type).toBe(FailureType.ThawFailed);
    expect(h.callsOf('thawGuest').map((t) => t.thawedBy)).toEqual(['workflow', 'workflow', 'workflow', 'compensation']);
    expect(h.after('snapshotDisks')).toEqual(['thawGuest', 'thawGuest', 'thawGuest', 'thawGuest', 'removeSourceSnaps']);
    expect(h.leftovers()).toEqual([]);
  });

  it('past the compensation’s 5 local tries, escalates to a server-tracked activity that thaws', async () => {
    const h = thawFails(host(), 8);
    await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot })).result());
    const thaws = h.calls.filter((c) => c.step === 'thawGuest');
    expect(thaws.map((c) => c.local)).toEqual([...Array(8).fill(true), false]);
    expect(h.after('snapshotDisks').slice(-1)).toEqual(['removeSourceSnaps']);
    expect(h.leftovers()).toEqual([]);
  }, 20_000);
});
