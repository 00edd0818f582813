import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model/failures';
import { FakeHost, type Step } from '../../support/fast/fake-host';
import { failureOf } from '../helpers/failure-of';
import { useWorkflowLane } from '../helpers/workflow-lane';

/*
 * A step of consistentSnapshot (image mode) fails for good: what is undone, in which order, and
 * that the run still ends with the step's own failure, the guest thawed, nothing stray and the
 * domain lock released. One disk, so the order of calls is the workflow's alone.
 */
const laneOf = useWorkflowLane();

let n = 0;
function oneDiskHost(): FakeHost {
  const h = new FakeHost(`vm-comp-${++n}`);
  h.disks = ['vda'];
  return h;
}

const fails = (type: string) => async (): Promise<never> => {
  throw ApplicationFailure.nonRetryable(`${type} injected`, type);
};

// Undo steps are registered before the step they undo: the thaw (urgent, first) and the source
// snapshots before prepare, the images once the freeze window is over. The thaw acts only once the
// freeze has been asked for: before that, nothing of the run's can be frozen.
const cases: { step: Step; undone: Step[]; type?: string }[] = [
  { step: 'checkTargets', undone: [] },
  { step: 'endPredecessorFreeze', undone: [] },
  { step: 'prepareSnapshots', undone: ['removeSourceSnaps'] },
  // quiesce require reports any freeze error as FreezeFailed.
  { step: 'freezeGuest', undone: ['thawGuest', 'removeSourceSnaps'], type: FailureType.FreezeFailed },
  { step: 'snapshotDisks', undone: ['thawGuest', 'removeSourceSnaps'] },
  { step: 'cloneDisk', undone: ['removeImages', 'removeSourceSnaps'] },
  { step: 'flattenDisk', undone: ['removeImages', 'removeSourceSnaps'] },
  { step: 'finalizeDisk', undone: ['removeImages', 'removeSourceSnaps'] },
  { step: 'recordRestorePoint', undone: ['removeImages', 'removeSourceSnaps'] },
];

describe.concurrent('compensation after a failed step', () => {
  it.each(cases)('$step fails: undoes $undone, in that order', async ({ step, undone, type }) => {
    const h = oneDiskHost().script(step, fails(`${step}Failure`));
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require' })).result());
    expect(f.type).toBe(type ?? `${step}Failure`);
    expect(h.after(step)).toEqual(undone);
    expect(h.leftovers()).toEqual([]);
    expect(await laneOf().lockState(h)).toBe('COMPLETED');
  });

  it('a run that failed before asking for the freeze neither thaws nor watches for a late freeze', async () => {
    const h = oneDiskHost().script('prepareSnapshots', fails('PrepareFailed'));
    await failureOf((await laneOf().start(h, { quiesce: 'require', lateSnapshotWatchMs: 777 })).result());
    expect(h.steps()).not.toContain('freezeGuest');
    expect(h.callsOf('thawGuest')).toEqual([]);
  });

  it('a freeze that failed unanswered is thawed with a late-freeze watch', async () => {
    const h = oneDiskHost().script('freezeGuest', fails('FreezeTimedOut'));
    await failureOf((await laneOf().start(h, { quiesce: 'require', lateSnapshotWatchMs: 777 })).result());
    expect(h.callsOf('thawGuest')).toEqual([expect.objectContaining({ lateFreezeWatchMs: 777 })]);
  });

  it('a failing undo step does not stop the next one, and is not swallowed', async () => {
    const h = oneDiskHost().script('flattenDisk', fails(FailureType.FlattenFailed)).script('removeImages', fails('RemoveFailed'));
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require' })).result());
    expect(h.after('flattenDisk')).toEqual(['removeImages', 'removeSourceSnaps']);
    expect(f.type).toBe('CompensationFailed');
    expect(f.message).toContain('remove images: ');
    expect(h.snaps.size).toBe(0);
    expect(await laneOf().lockState(h)).toBe('COMPLETED');
  });

  it('two disks: a failed clone waits for its sibling’s copy before anything is undone', async () => {
    const h = new FakeHost(`vm-comp-${++n}`);
    let siblingFlattened = false;
    let removedWhileCopying = false;
    h.script('cloneDisk', async (req, real) => {
      if (req.target === 'vda') throw ApplicationFailure.nonRetryable('clone failed', FailureType.CloneFailed);
      return real();
    });
    h.script('flattenDisk', async (_req, real) => {
      await new Promise((r) => setTimeout(r, 300));
      siblingFlattened = true;
      return real();
    });
    h.script('removeImages', async (_req, real) => {
      removedWhileCopying ||= !siblingFlattened;
      return real();
    });
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require' })).result());
    expect(f.type).toBe(FailureType.CloneFailed);
    expect(removedWhileCopying).toBe(false);
    expect(h.steps().slice(-2)).toEqual(['removeImages', 'removeSourceSnaps']);
    expect(h.leftovers()).toEqual([]);
  });
});
