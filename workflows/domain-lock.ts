import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import {
  CancellationScope,
  ParentClosePolicy,
  condition,
  defineSignal,
  getExternalWorkflowHandle,
  log,
  patched,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { lockWorkflowId } from '../src/model/naming';

export const releaseLock = defineSignal('release');
/** Release only if held for this workflow id: a run replaced by Reset can no longer release its lock itself. */
export const releaseLockFor = defineSignal<[{ workflowId: string }]>('release-for');

/**
 * Holds a domain for one snapshot run. A child workflow with an id derived from the domain UUID:
 * Temporal allows one running execution per id, so a second run for the same VM is refused at
 * start (two same-name `rbd snap create` calls would both "succeed" on Ceph 16, so EEXIST cannot
 * be the lock). It dies with its parent (ParentClosePolicy TERMINATE), so a terminated run never
 * leaves the domain locked.
 */
export async function domainLock(holder: { workflowId: string; runId: string }): Promise<void> {
  let released = false;
  setHandler(releaseLock, () => {
    released = true;
  });
  setHandler(releaseLockFor, ({ workflowId }) => {
    if (workflowId === holder.workflowId) released = true;
  });
  await condition(() => released);
}

export interface HeldLock {
  release(): Promise<void>;
}

export async function acquireDomainLock(domain: { name: string; uuid: string }, holder: { workflowId: string; runId: string }): Promise<HeldLock> {
  const lockId = lockWorkflowId(domain.uuid);
  const start = () =>
    // Started outside the caller's cancellation scope: cancelling the snapshot run must not
    // cancel its lock before the compensations (which still need the domain) have run.
    CancellationScope.nonCancellable(() =>
      startChild(domainLock, {
        workflowId: lockId,
        args: [holder],
        parentClosePolicy: ParentClosePolicy.TERMINATE,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        staticSummary: `lock on ${domain.name} held by ${holder.workflowId}`,
      }),
    );
  try {
    let handle;
    try {
      handle = await start();
    } catch (err) {
      // A Reset terminates the run it replaces without terminating that run's lock (observed on
      // Temporal 1.5.1's dev server): the lock still names this workflow id as its holder. Only
      // one run of an id runs at a time, so that holder is gone: take the lock back.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError) || !isResetRun() || !patched('vmsnap-lock-takeover')) throw err;
      handle = await takeOver(lockId, holder.workflowId, start, err);
    }
    const child = handle;
    return {
      release: () =>
        CancellationScope.nonCancellable(async () => {
          try {
            await child.signal(releaseLock);
          } catch (err) {
            // After a Reset the lock's parent is the replaced run, so a child-only signal from
            // this run fails: release it by its run id instead. Its completion is reported to
            // that old parent, so there is no result to wait for here.
            if (patched('vmsnap-lock-release-after-reset')) {
              try {
                await getExternalWorkflowHandle(lockId, child.firstExecutionRunId).signal(releaseLockFor, { workflowId: holder.workflowId });
                return;
              } catch (again) {
                log.warn('domain lock was already released', { lock: lockId, error: String(again) });
                return;
              }
            }
            log.warn('domain lock was already released', { lock: lockId, error: String(err) });
            return;
          }
          try {
            await child.result();
          } catch (err) {
            // Already gone (terminated by hand): the lock is free either way.
            log.warn('domain lock was already released', { lock: lockId, error: String(err) });
          }
        }),
    };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw ApplicationFailure.nonRetryable(
        `another vmsnap snapshot of ${domain.name} is in progress (lock workflow ${lockId}); ` +
          'only one snapshot per VM runs at a time — retry when it finishes',
        FailureType.DomainBusy,
      );
    }
    throw err;
  }
}

/** A run made by Reset keeps the replaced run's first run id (its start event is copied). */
export function isResetRun(): boolean {
  const info = workflowInfo();
  return info.firstExecutionRunId !== info.runId && !info.continuedFromExecutionRunId;
}

/** Asks a running lock to release itself if it is held for this workflow id, then starts ours. */
async function takeOver<T>(lockId: string, workflowId: string, start: () => Promise<T>, busy: unknown): Promise<T> {
  try {
    await getExternalWorkflowHandle(lockId).signal(releaseLockFor, { workflowId });
  } catch {
    // Not running any more: the start below will tell.
  }
  for (let i = 0; i < 4; i++) {
    await sleep(750);
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  // Still held: by another workflow id (a real concurrent run), which the signal did not release.
  throw busy;
}
