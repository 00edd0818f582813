import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model/failures';
import { FakeHost, type Step } from '../helpers/fake-host';
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
// snapshots before prepare, the images once the freeze window is over.
const cases: { step: Step; undone: Step[]; type?: string }[] = [
  { step: 'checkTargets', undone: [] },
  { step: 'endPredecessorFreeze', undone: [] },
  { step: 'prepareSnapshots', undone: ['thawGuest', 'removeSourceSnaps'] },
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

  it('the thaw compensation of a run that never froze only looks (late-freeze watch), it thaws nothing', async () => {
    const h = oneDiskHost().script('prepareSnapshots', fails('PrepareFailed'));
    await failureOf((await laneOf().start(h, { quiesce: 'require', lateSnapshotWatchMs: 777 })).result());
    expect(h.steps()).not.toContain('freezeGuest');
    expect(h.callsOf('thawGuest')).toEqual([expect.objectContaining({ thawedBy: 'compensation', lateFreezeWatchMs: 777 })]);
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
