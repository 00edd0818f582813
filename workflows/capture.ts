import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../src/model/failures';
import { failureType } from './failure-of';
import { judgeFreeze } from '../src/model/quiesce-truth';
import type { Capture } from '../src/model/snapshot-result';
import type { FreezeResult, SnapshotDisksResult, SnapshotPlan, ThawResult } from '../src/model/types';
import { cleanup, freezeWindow, prepareLocal } from './activity-profiles';
import type { Compensations } from './compensations';
import { FreezeWindow } from './freeze-window';
import type { RunContext } from './run-context';

/**
 * freeze → snapshot every disk → thaw, with the thaw compensation registered before the freeze
 * is asked for and the snapshot cleanup registered before the snapshot.
 */
export async function captureDisks(ctx: RunContext, plan: SnapshotPlan, saga: Compensations): Promise<Capture> {
  const { input, progress } = ctx;
  const window = new FreezeWindow(ctx, plan);
  let snapshotTimedOut = false;
  if (plan.freeze) saga.addUrgent('thaw', () => window.undo());
  saga.add('remove source snapshots', async () => {
    await cleanupSnaps(plan, snapshotTimedOut ? input.lateSnapshotWatchMs : 0);
  });

  // A replayed or retried run may find snapshots its dead predecessor took under this run's
  // names (the run's name id: its router's, for a routed run); they are removed here, before the
  // freeze, so the window holds only the new snapshot.
  await prepareLocal().prepareSnapshots.executeWithOptions({ summary: 'prepare snapshots' }, [
    { workflowId: ctx.id.nameId, snaps: plan.disks.map((d) => ({ source: d.source, snap: d.sourceSnap })), timeoutMs: input.snapshotTimeoutMs },
  ]);

  const freeze = plan.freeze ? await window.freeze() : undefined;
  progress.phase('snapshot');
  let snapshot: SnapshotDisksResult;
  try {
    snapshot = await freezeWindow(input).snapshotDisks.executeWithOptions({ summary: `snapshot ${plan.disks.length} disk(s)` }, [
      { snaps: plan.disks.map((d) => ({ target: d.target, source: d.source, snap: d.sourceSnap })), timeoutMs: input.snapshotTimeoutMs },
    ]);
  } catch (err) {
    snapshotTimedOut = failureType(err) === FailureType.SnapshotTimeout;
    throw err;
  }
  const thaw = freeze ? await window.close() : undefined;
  return verdictOf(ctx, window.reason, snapshot, freeze, thaw);
}

/** What the capture was: quiesced only when the freeze provably held (src/model/quiesce-truth.ts). */
function verdictOf(ctx: RunContext, reason: string, snapshot: SnapshotDisksResult, freeze?: FreezeResult, thaw?: ThawResult): Capture {
  if (!freeze || !thaw) return { quiesced: false, quiesceReason: reason || 'not frozen', frozenFilesystems: 0, snapshot };
  const verdict = judgeFreeze(freeze, snapshot, thaw, ctx.input.freezeDeadlineMs);
  if (verdict.quiesced) return { quiesced: true, quiesceReason: verdict.reason, frozenFilesystems: freeze.frozenFilesystems, freeze, snapshot, thaw };
  if (ctx.input.quiesce === 'require') throw ApplicationFailure.nonRetryable(verdict.reason, verdict.failure);
  return { quiesced: false, quiesceReason: verdict.reason, frozenFilesystems: 0, freeze, snapshot, thaw };
}

async function cleanupSnaps(plan: SnapshotPlan, watchLateMs: number): Promise<void> {
  await cleanup().removeSourceSnaps.executeWithOptions({ summary: 'remove temporary snapshots' }, [
    { snaps: plan.disks.map((d) => ({ source: d.source, snap: d.sourceSnap })), watchLateMs },
  ]);
}
