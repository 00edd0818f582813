import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { CancellationScope, ParentClosePolicy, condition, getExternalWorkflowHandle, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import { limitTicket, limitWorkflowId } from '../src/model/limits';
import type { LimitKind, LimitRequest } from '../src/model/limits';
import { answerHolderProbes } from './domain-lock';
import { fleetLimit, limitAnswerSignal, limitReleaseSignal, limitRequestSignal } from './fleet-limit';

export interface HeldTurn {
  waitedMs: number;
  release(): Promise<void>;
}

export interface TurnWanted {
  kind: LimitKind;
  scope: string;
  n: number;
  label: string;
}

/**
 * Takes a turn of each limit, in the order given (every run asks in the same order, so two runs
 * never wait on each other), waiting at most `maxWaitMs` for each: FleetBusy (retryable) past it
 * or when a queue is full. What was taken is released on the way out of a failure.
 */
export async function takeTurns(wanted: TurnWanted[], opts: { maxWaitMs: number; leaseMs: number }): Promise<HeldTurn[]> {
  const answers = new Map<string, 'granted' | 'refused'>();
  setHandler(limitAnswerSignal, ({ ticket, answer }) => {
    answers.set(ticket, answer);
  });
  answerHolderProbes();
  const held: HeldTurn[] = [];
  try {
    for (const w of wanted) held.push(await takeTurn(w, opts, answers));
  } catch (err) {
    for (const h of held.reverse()) await h.release();
    throw err;
  }
  return held;
}

async function takeTurn(w: TurnWanted, opts: { maxWaitMs: number; leaseMs: number }, answers: Map<string, 'granted' | 'refused'>): Promise<HeldTurn> {
  const { workflowId, runId, firstExecutionRunId } = workflowInfo();
  const id = limitWorkflowId(w.kind, w.scope);
  const req: LimitRequest = { workflowId, runId, ticket: limitTicket(firstExecutionRunId, w.kind), leaseMs: opts.leaseMs, n: w.n };
  const release = () =>
    CancellationScope.nonCancellable(async () => {
      // A limit that is not running holds nothing of ours.
      await getExternalWorkflowHandle(id).signal(limitReleaseSignal, { ticket: req.ticket }).catch(() => undefined);
    });
  const t0 = Date.now();
  try {
    await CancellationScope.nonCancellable(() => ask(id, req));
    const answered = await condition(() => answers.has(req.ticket), opts.maxWaitMs);
    const answer = answers.get(req.ticket);
    if (answer === 'granted') return { waitedMs: Date.now() - t0, release };
    const why = answered ? `the ${w.label} queue is full` : `no turn of ${w.n} ${w.label} came in ${Math.round((Date.now() - t0) / 1000)} s`;
    throw ApplicationFailure.retryable(why, FailureType.FleetBusy);
  } catch (err) {
    // Cancelled, busy or failed while waiting: the request must not be granted to nobody.
    await release();
    throw err;
  }
}

/** Signals the limit, starting it when it is not running (it ends when idle). */
async function ask(id: string, req: LimitRequest): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await getExternalWorkflowHandle(id).signal(limitRequestSignal, req);
      return;
    } catch (err) {
      if (!/not found/i.test(String((err as Error)?.message ?? err))) throw err;
    }
    try {
      await startChild(fleetLimit, {
        workflowId: id,
        taskQueue: FLEET_TASK_QUEUE,
        args: [{ requests: [req] }],
        // It serves every run of its scope: it must outlive this one.
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        staticSummary: `fleet limit ${id}`,
      });
      return;
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  throw ApplicationFailure.retryable(`could not reach the fleet limit ${id}`, FailureType.FleetBusy);
}
