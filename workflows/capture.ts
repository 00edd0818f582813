import { ApplicationFailure, TemporalFailure } from '@temporalio/common';
import { isCancellation, log, patched, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import type { SnapshotInput } from '../src/model/input';
import { judgeFreeze } from '../src/model/quiesce-truth';
import type { Capture } from '../src/model/snapshot-result';
import type { FreezeResult, SnapshotDisksResult, SnapshotPlan, ThawResult } from '../src/model/types';
import { cleanup, freezeWindow, prepareLocal, thawEscalated, thawLocal } from './activity-profiles';
import type { Compensations } from './compensations';
import type { Progress } from './progress';

/**
 * freeze → snapshot every disk → thaw, with the thaw compensation registered before the freeze
 * is attempted and the snapshot cleanup registered before the snapshot.
 */
export async function captureDisks(plan: SnapshotPlan, input: SnapshotInput, saga: Compensations, progress: Progress): Promise<Capture> {
  const { workflowId, runId } = workflowInfo();
  const window = freezeWindow(input);
  const owner = `${workflowId}/${runId}`;
  const dom = { domainUuid: plan.domain.uuid, domainName: plan.domain.name, agentTimeoutSec: input.agentTimeoutSec, owner };
  let thawed = !plan.freeze;
  // Until the freeze call has answered, a freeze may still land in the guest: the thaw that
  // undoes it must also watch for a late one.
  let freezeAnswered = false;
  let snapshotTimedOut = false;

  if (plan.freeze) {
    saga.addUrgent('thaw', async () => {
      if (!thawed) await thawUntilDone(input, dom, progress, freezeAnswered ? 0 : input.lateSnapshotWatchMs);
      thawed = true;
    });
  }
  saga.add('remove source snapshots', async () => {
    await cleanupSnaps(plan, snapshotTimedOut ? input.lateSnapshotWatchMs : 0);
  });

  // A replayed or retried run may find snapshots its dead predecessor took under this run's
  // names; they are removed here, before the freeze, so the window holds only the new snapshot.
  await prepareLocal().prepareSnapshots.executeWithOptions({ summary: 'prepare snapshots' }, [
    { workflowId, snaps: plan.disks.map((d) => ({ source: d.source, snap: d.sourceSnap })), timeoutMs: input.snapshotTimeoutMs },
  ]);

  let freeze: FreezeResult | undefined;
  let reason = plan.noFreezeReason ?? '';
  if (plan.freeze) {
    progress.phase('freeze');
    try {
      freeze = await window.freezeGuest.executeWithOptions({ summary: `freeze ${plan.domain.name}` }, [
        { ...dom, deadlineMs: input.freezeDeadlineMs, owner },
      ]);
      freezeAnswered = true;
    } catch (err) {
      if (failureType(err) === FailureType.GuestFrozenByOther && patched('thaw-only-own-freezes')) {
        // Somebody else's freeze: nothing of ours to thaw, and theirs must stay.
        thawed = true;
        throw err;
      }
      if (isCancellation(err)) throw err;
      if (input.quiesce === 'require') throw asQuiesceFailure(err);
      // prefer: make sure a freeze that landed late is undone, then go on crash-consistent.
      await thawUntilDone(input, dom, progress, input.lateSnapshotWatchMs);
      thawed = true;
      reason = `freeze failed: ${messageOf(err)}`;
    }
    if (freeze && freeze.frozenFilesystems === 0) {
      await thawUntilDone(input, dom, progress, 0);
      thawed = true;
      if (input.quiesce === 'require') {
        throw ApplicationFailure.nonRetryable('quiesce required but the guest agent froze 0 filesystems', FailureType.QuiesceUnavailable);
      }
      reason = 'guest agent froze 0 filesystems';
      freeze = undefined;
    }
  }

  progress.phase('snapshot');
  let snapshot: SnapshotDisksResult;
  try {
    snapshot = await window.snapshotDisks.executeWithOptions({ summary: `snapshot ${plan.disks.length} disk(s)` }, [
      {
        snaps: plan.disks.map((d) => ({ target: d.target, source: d.source, snap: d.sourceSnap })),
        timeoutMs: input.snapshotTimeoutMs,
      },
    ]);
  } catch (err) {
    snapshotTimedOut = failureType(err) === FailureType.SnapshotTimeout;
    throw err;
  }

  let thaw: ThawResult | undefined;
  if (freeze && !thawed) {
    progress.phase('thaw');
    thaw = await thawLocal(input, 3).thawGuest.executeWithOptions({ summary: `thaw ${plan.domain.name}` }, [
      { ...dom, thawedBy: 'workflow' },
    ]);
    thawed = true;
  }

  if (freeze && thaw) {
    const verdict = judgeFreeze(freeze, snapshot, thaw, input.freezeDeadlineMs);
    if (!verdict.quiesced) {
      if (input.quiesce === 'require') throw ApplicationFailure.nonRetryable(verdict.reason, verdict.failure);
      return { quiesced: false, quiesceReason: verdict.reason, frozenFilesystems: 0, freeze, snapshot, thaw };
    }
    return { quiesced: true, quiesceReason: verdict.reason, frozenFilesystems: freeze.frozenFilesystems, freeze, snapshot, thaw };
  }
  return { quiesced: false, quiesceReason: reason || 'not frozen', frozenFilesystems: 0, snapshot };
}

/** Local retries first; past them, escalate to a server-tracked activity that retries until done. */
async function thawUntilDone(
  input: SnapshotInput,
  dom: { domainUuid: string; domainName: string; agentTimeoutSec: number; owner: string },
  progress: Progress,
  lateFreezeWatchMs: number,
): Promise<void> {
  const req = { ...dom, thawedBy: 'compensation' as const, ...(lateFreezeWatchMs ? { lateFreezeWatchMs } : {}) };
  try {
    await thawLocal(input, 5).thawGuest.executeWithOptions({ summary: `thaw ${dom.domainName} (compensation)` }, [req]);
  } catch (err) {
    log.error('thaw failed after local retries; escalating', { domain: dom.domainName, error: messageOf(err) });
    progress.phase('thaw-escalated');
    await thawEscalated(input).thawGuest.executeWithOptions({ summary: `thaw ${dom.domainName} (escalated)` }, [req]);
  }
}

async function cleanupSnaps(plan: SnapshotPlan, watchLateMs: number): Promise<void> {
  await cleanup().removeSourceSnaps.executeWithOptions({ summary: 'remove temporary snapshots' }, [
    {
      snaps: plan.disks.map((d) => ({ source: d.source, snap: d.sourceSnap })),
      watchLateMs,
    },
  ]);
}

function asQuiesceFailure(err: unknown): ApplicationFailure {
  const type = failureType(err);
  if (type === FailureType.QuiesceUnavailable) {
    return ApplicationFailure.nonRetryable(`quiesce required but ${messageOf(err)}`, FailureType.QuiesceUnavailable);
  }
  return ApplicationFailure.nonRetryable(`quiesce required but the freeze failed: ${messageOf(err)}`, FailureType.FreezeFailed);
}

export function failureType(err: unknown): string | undefined {
  let e: unknown = err;
  while (e instanceof TemporalFailure) {
    if (e instanceof ApplicationFailure) return e.type ?? undefined;
    e = e.cause;
  }
  return undefined;
}

export function messageOf(err: unknown): string {
  let e: unknown = err;
  while (e instanceof TemporalFailure && e.cause) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
