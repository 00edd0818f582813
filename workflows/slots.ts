import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { CancellationScope, ParentClosePolicy, sleep, startChild } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { slotWorkflowId } from '../src/model/naming';
import { domainLock, releaseLock } from './domain-lock';

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
  for (let round = 0; ; round++) {
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
              await child.signal(releaseLock).catch(() => undefined);
            }),
        };
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
    }
    if (Date.now() - t0 > opts.maxWaitMs) {
      throw ApplicationFailure.retryable(`all ${n} ${opts.label} slots stayed taken for ${Math.round((Date.now() - t0) / 1000)} s`, FailureType.FleetBusy);
    }
    await sleep(Math.min(250 * 2 ** round, 2000));
  }
}
