import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import { CancellationScope, ParentClosePolicy, condition, getExternalWorkflowHandle, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import type { ChildWorkflowHandle } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import { limitTicket, limitWorkflowId } from '../src/model/limits';
import type { LimitKind, LimitRequest } from '../src/model/limits';
import { answerHolderProbes } from './holder';
import { fleetLimit, limitAnswerSignal, limitReleaseSignal, limitRequestSignal } from './fleet-limit';
import type { LimitAnswer } from './fleet-limit';

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
  const answers = listen();
  const held: HeldTurn[] = [];
  try {
    for (const w of wanted) held.push(await takeTurn(w, opts, answers));
  } catch (err) {
    for (const h of held.reverse()) await h.release();
    throw err;
  }
  return held;
}

/** The answers the limits send this run, by ticket; and this run answers the limits' probes. */
function listen(): Map<string, LimitAnswer> {
  const answers = new Map<string, LimitAnswer>();
  setHandler(limitAnswerSignal, ({ ticket, answer }) => {
    answers.set(ticket, answer);
  });
  answerHolderProbes();
  return answers;
}

function requestOf(kind: LimitKind, n: number, leaseMs: number): LimitRequest {
  const { workflowId, runId, firstExecutionRunId } = workflowInfo();
  return { workflowId, runId, ticket: limitTicket(firstExecutionRunId, kind), leaseMs, n };
}

/** Gives a turn back by its ticket; a limit that is not running holds nothing of ours. */
function releaseOf(id: string, ticket: string): () => Promise<void> {
  return () =>
    CancellationScope.nonCancellable(async () => {
      await getExternalWorkflowHandle(id).signal(limitReleaseSignal, { ticket }).catch(() => undefined);
    });
}

async function takeTurn(w: TurnWanted, opts: { maxWaitMs: number; leaseMs: number }, answers: Map<string, LimitAnswer>): Promise<HeldTurn> {
  const id = limitWorkflowId(w.kind, w.scope);
  const req = requestOf(w.kind, w.n, opts.leaseMs);
  const release = releaseOf(id, req.ticket);
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
    if (await signalRequest(id, req)) return;
    if (await startLimit(id, { requests: [req] }, `fleet limit ${id}`)) return;
  }
  throw ApplicationFailure.retryable(`could not reach the fleet limit ${id}`, FailureType.FleetBusy);
}

/** False when the limit is not running. */
async function signalRequest(id: string, req: LimitRequest): Promise<boolean> {
  try {
    await getExternalWorkflowHandle(id).signal(limitRequestSignal, req);
    return true;
  } catch (err) {
    if (!/not found/i.test(String((err as Error)?.message ?? err))) throw err;
    return false;
  }
}

/** Starts the limit on the fleet queue, which every worker polls; undefined when it runs already. */
async function startLimit(id: string, init: Parameters<typeof fleetLimit>[0], summary: string): Promise<LimitChild | undefined> {
  try {
    return await startChild(fleetLimit, {
      workflowId: id,
      taskQueue: FLEET_TASK_QUEUE,
      args: [init],
      // It serves every run of its scope: it must outlive this one. A holder that closes
      // without releasing is let go by the limit (its lease, or the next request).
      parentClosePolicy: ParentClosePolicy.ABANDON,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      staticSummary: summary,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    return undefined;
  }
}

type LimitChild = ChildWorkflowHandle<typeof fleetLimit>;

/**
 * The one turn of a limit of one without a queue (a VM's domain lock): the run that starts the
 * limit holds it from the start, so a free lock costs one child start and no answer. While it
 * runs, the run asks; a live holder's limit refuses at once (`busy`), a closed holder lets go, a
 * run a Reset made takes its replaced run's grant back (same workflow id, same ticket).
 * `ended`: a legacy lock let go, so start again. No answer in ANSWER_MS: a legacy lock on a
 * worker without this code, `busy`.
 */
export async function takeSoleTurn(id: string, summary: string, leaseMs: number): Promise<HeldTurn | 'busy'> {
  const answers = listen();
  const req: LimitRequest = { ...requestOf('lock', 1, leaseMs), queue: false };
  const held: HeldTurn = { waitedMs: 0, release: releaseOf(id, req.ticket) };
  for (let attempt = 0; attempt < 5; attempt++) {
    const child = await CancellationScope.nonCancellable(() => startLimit(id, { granted: req, tuning: { idleMs: 0 } }, summary));
    if (child) return { waitedMs: 0, release: releaseStarted(child, id, req.ticket) };
    answers.delete(req.ticket);
    if (!(await CancellationScope.nonCancellable(() => signalRequest(id, req)))) continue; // it ended meanwhile
    await condition(() => answers.has(req.ticket), ANSWER_MS);
    const answer = answers.get(req.ticket);
    if (answer === 'granted') return held;
    if (answer === 'ended') continue;
    if (answer === undefined) await held.release(); // unanswered: a late grant must not stand for nobody
    return 'busy';
  }
  return 'busy';
}

const ANSWER_MS = 30_000;

/**
 * Gives back a lock this run started: its end is reported to this run, so the run waits for it
 * (as it waited for the legacy lock's) rather than let it land during its last workflow task.
 * The lock ends at once: given back by its starter, it grants nobody else (fleet-limit.ts). A
 * run a Reset made replays the start, but the lock's parent is the replaced run: the child-only
 * signal fails, and it gives the lock back by workflow id without waiting.
 */
function releaseStarted(child: LimitChild, id: string, ticket: string): () => Promise<void> {
  return () =>
    CancellationScope.nonCancellable(async () => {
      try {
        await child.signal(limitReleaseSignal, { ticket });
      } catch {
        await releaseOf(id, ticket)();
        return;
      }
      await child.result().catch(() => undefined); // ended otherwise (terminated by hand): free either way
    });
}
