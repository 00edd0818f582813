import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { CancellationScope, ParentClosePolicy, getExternalWorkflowHandle, patched, sleep, startChild } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { slotWorkflowId } from '../src/model/naming';
import { checkHolder, domainLock, HOLDER_CHECK, isResetRun, releaseLock, releaseLockFor } from './domain-lock';
import { answerHolderProbes } from './holder';

export interface HeldSlot {
  slot: number;
  waitedMs: number;
  release(): Promise<void>;
}

/**
 * One of `n` slots of a fleet limit, held like the domain lock: a child workflow whose id only
 * one execution can hold at a time, so the limit holds across workers and hosts and survives any
 * of them dying (the slot dies with its run: ParentClosePolicy TERMINATE). A run that finds every
 * slot taken waits, outside its freeze window, and tries again; `maxWaitMs` bounds the wait.
 */
export async function acquireSlot(
  kind: 'window' | 'snap',
  scope: string,
  n: number,
  holder: { workflowId: string; runId: string },
  opts: { maxWaitMs: number; label: string },
): Promise<HeldSlot> {
  const t0 = Date.now();
  // Start the search at a slot that depends on the run, so concurrent runs do not all queue on slot 0.
  const first = [...holder.workflowId].reduce((a, c) => (a * 31 + c.charCodeAt(0)) >>> 0, 7) % n;
  // A Reset leaves the replaced run's children running (see domain-lock.ts), its slots included,
  // and a slot it held names this workflow id: only one run of an id runs at a time, so free them.
  // (patched, never deprecated: the part of a reset run's history that the replaced run wrote
  // replays without it, and only patched() can tell that part from the new one.)
  if (isResetRun() && patched('vmsnap-slot-release-after-reset')) {
    for (let k = 0; k < n; k++) {
      await getExternalWorkflowHandle(slotWorkflowId(kind, scope, k)).signal(releaseLockFor, { workflowId: holder.workflowId }).catch(() => undefined);
    }
  }
  answerHolderProbes();
  for (let round = 0; ; round++) {
    const taken: string[] = [];
    for (let i = 0; i < n; i++) {
      const k = (first + i) % n;
      try {
        const child = await CancellationScope.nonCancellable(() =>
          startChild(domainLock, {
            workflowId: slotWorkflowId(kind, scope, k),
            args: [holder],
            parentClosePolicy: ParentClosePolicy.TERMINATE,
            workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
            staticSummary: `${opts.label} slot ${k + 1}/${n} held by ${holder.workflowId}`,
          }),
        );
        return {
          slot: k,
          waitedMs: Date.now() - t0,
          release: () =>
            CancellationScope.nonCancellable(async () => {
              try {
                await child.signal(releaseLock);
              } catch {
                // After a Reset the slot's parent is the replaced run, so a child-only signal
                // fails: release it by run id, as the domain lock does.
                await getExternalWorkflowHandle(child.workflowId, child.firstExecutionRunId).signal(releaseLockFor, { workflowId: holder.workflowId }).catch(() => undefined);
              }
            }),
        };
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
        taken.push(slotWorkflowId(kind, scope, k));
      }
    }
    // Once per wait: a slot whose holder run is closed (replaced by a Reset whose new run failed
    // before it got here) would stay taken forever; asked, it checks its holder and lets go.
    if (round === 0 && patched(HOLDER_CHECK)) {
      for (const id of taken) await getExternalWorkflowHandle(id).signal(checkHolder).catch(() => undefined);
    }
    if (Date.now() - t0 > opts.maxWaitMs) {
      throw ApplicationFailure.retryable(`all ${n} ${opts.label} slots stayed taken for ${Math.round((Date.now() - t0) / 1000)} s`, FailureType.FleetBusy);
    }
    await sleep(Math.min(250 * 2 ** round, 2000));
  }
}
