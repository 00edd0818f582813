import { CancelledFailure } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { FakeHost, type Step } from '../../support/fast/fake-host';
import { useWorkflowLane } from '../helpers/workflow-lane';

/*
 * An operator cancels consistentSnapshot (image mode) while a step is running. The step's effect
 * is taken to have landed (the worst case: a freeze or a snapshot that happened, unanswered), and
 * the compensations, which a cancel must not interrupt, must undo it all.
 */
const laneOf = useWorkflowLane();

let n = 0;
// A cancel reaches a workflow busy with a local activity only when core heartbeats its workflow
// task (at 80% of the task timeout: 8 s by default); a short timeout keeps the lane fast.
const start = { workflowTaskTimeout: '2s' } as const;

const cases: { step: Step; undone: Step[]; lock: string }[] = [
  { step: 'inspectDomain', undone: [], lock: 'none' },
  { step: 'checkTargets', undone: [], lock: 'COMPLETED' },
  { step: 'endPredecessorFreeze', undone: [], lock: 'COMPLETED' },
  { step: 'prepareSnapshots', undone: ['removeSourceSnaps'], lock: 'COMPLETED' },
  { step: 'freezeGuest', undone: ['thawGuest', 'removeSourceSnaps'], lock: 'COMPLETED' },
  { step: 'snapshotDisks', undone: ['thawGuest', 'removeSourceSnaps'], lock: 'COMPLETED' },
  { step: 'thawGuest', undone: ['thawGuest', 'removeSourceSnaps'], lock: 'COMPLETED' },
  { step: 'cloneDisk', undone: ['removeImages', 'removeSourceSnaps'], lock: 'COMPLETED' },
  { step: 'flattenDisk', undone: ['removeImages', 'removeSourceSnaps'], lock: 'COMPLETED' },
  { step: 'finalizeDisk', undone: ['removeImages', 'removeSourceSnaps'], lock: 'COMPLETED' },
  { step: 'recordRestorePoint', undone: ['removeImages', 'removeSourceSnaps'], lock: 'COMPLETED' },
];

describe.concurrent('cancel while a step runs', () => {
  it.each(cases)('at $step: undoes $undone, then ends cancelled', async ({ step, undone, lock }) => {
    const h = new FakeHost(`vm-cancel-${++n}`);
    h.disks = ['vda'];
    h.hang(step);
    const run = await laneOf().start(h, { quiesce: 'require' }, start);
    await h.reached(step);
    await run.cancel();
    const err = await run.result().then(
      () => undefined,
      (e: unknown) => e,
    );
    h.releaseHung();
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(h.after(step)).toEqual(undone);
    expect(h.leftovers()).toEqual([]);
    expect(await laneOf().lockState(h)).toBe(lock);
  });

  it('at freezeGuest: the thaw watches for a freeze that lands after the cancel', async () => {
    const h = new FakeHost(`vm-cancel-${++n}`);
    h.hang('freezeGuest');
    const run = await laneOf().start(h, { quiesce: 'prefer', lateSnapshotWatchMs: 999 }, start);
    await h.reached('freezeGuest');
    await run.cancel();
    await run.result().catch(() => undefined);
    h.releaseHung();
    expect(h.callsOf('thawGuest')).toEqual([expect.objectContaining({ thawedBy: 'compensation', lateFreezeWatchMs: 999 })]);
  });
});
