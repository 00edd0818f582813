import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { CancellationScope, ParentClosePolicy, condition, defineSignal, log, setHandler, startChild } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { lockWorkflowId } from '../src/model/naming';

export const releaseLock = defineSignal('release');

/**
 * Holds a domain for one snapshot run. A child workflow with an id derived from the domain UUID:
 * Temporal allows one running execution per id, so a second run for the same VM is refused at
 * start (two same-name `rbd snap create` calls would both "succeed" on Ceph 16, so EEXIST cannot
 * be the lock). It dies with its parent (ParentClosePolicy TERMINATE), so a terminated run never
 * leaves the domain locked.
 */
export async function domainLock(_holder: { workflowId: string; runId: string }): Promise<void> {
  let released = false;
  setHandler(releaseLock, () => {
    released = true;
  });
  await condition(() => released);
}

export interface HeldLock {
  release(): Promise<void>;
}

export async function acquireDomainLock(domain: { name: string; uuid: string }, holder: { workflowId: string; runId: string }): Promise<HeldLock> {
  const lockId = lockWorkflowId(domain.uuid);
  try {
    // Started outside the caller's cancellation scope: cancelling the snapshot run must not
    // cancel its lock before the compensations (which still need the domain) have run.
    const handle = await CancellationScope.nonCancellable(() =>
      startChild(domainLock, {
        workflowId: lockId,
        args: [holder],
        parentClosePolicy: ParentClosePolicy.TERMINATE,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        staticSummary: `lock on ${domain.name} held by ${holder.workflowId}`,
      }),
    );
    return {
      release: () =>
        CancellationScope.nonCancellable(async () => {
          try {
            await handle.signal(releaseLock);
            await handle.result();
          } catch (err) {
            // Already gone (terminated by hand, or reset): the lock is free either way.
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
