import { condition, continueAsNew, defineQuery, defineSignal, getExternalWorkflowHandle, setHandler, workflowInfo } from '@temporalio/workflow';
import { emptyLimit, grant, heldFromStart, nextLeaseEnd, nextTurn, pastLease, releaseTurn, renewLease, requestTurn } from '../src/model/limits';
import type { LimitRequest, LimitState } from '../src/model/limits';
import { stillRuns } from './holder';

export const limitRequestSignal = defineSignal<[LimitRequest]>('limitRequest');
export const limitReleaseSignal = defineSignal<[{ ticket: string }]>('limitRelease');
/**
 * Sent to the asking run: its turn came (`granted`), or the queue is full or takes no waiters
 * (`refused`); `ended`: a legacy domain lock let go without deciding (workflows/domain-lock.ts): ask again.
 */
export type LimitAnswer = 'granted' | 'refused' | 'ended';
export const limitAnswerSignal = defineSignal<[{ ticket: string; answer: LimitAnswer }]>('limitAnswer');
export const limitStateQuery = defineQuery<LimitState>('limitState');

/**
 * One fleet limit's FIFO queue (src/model/limits.ts): `vmsnap-limit-window-<host>` for a host's
 * freeze windows, `vmsnap-limit-snap-<fsid>` for a cluster's snapshots. Runs ask by signal and
 * are answered by signal when their turn comes, oldest first; nobody polls. A grant past its lease
 * is kept while its holder run still runs (a closed run, however it ended, lets go), so the
 * limit holds at every moment and nothing leaks. Idle for IDLE_MS it ends; the next request starts
 * it again (workflows/limits.ts). A VM's domain lock is one too (`vmsnap-lock-<uuid>`, n = 1, no
 * queue, idle 0): `granted` is the run whose start of the limit was its grant.
 */
export async function fleetLimit(init: { state?: LimitState; requests?: LimitRequest[]; granted?: LimitRequest; tuning?: LimitTuning } = {}): Promise<void> {
  const s: LimitState = init.state ?? (init.granted ? heldFromStart(init.granted, Date.now()) : emptyLimit());
  const { idleMs = IDLE_MS, maxEvents = MAX_EVENTS } = init.tuning ?? {};
  let inbox: LimitRequest[] = [...(init.requests ?? [])];
  let released = 0;
  setHandler(limitRequestSignal, (r) => {
    inbox.push(r);
  });
  setHandler(limitReleaseSignal, ({ ticket }) => {
    // A request and its withdrawal can arrive in one activation: the request is still unread.
    inbox = inbox.filter((r) => r.ticket !== ticket);
    releaseTurn(s, ticket);
    released++;
  });
  setHandler(limitStateQuery, () => s);
  let idleSince = Date.now();

  for (;;) {
    const answers = settle(s, inbox);
    await Promise.all(answers);
    if (answers.length) continue; // a dropped holder or waiter may have freed a grant

    if (s.held.length || s.queue.length) idleSince = Date.now();
    else if (Date.now() - idleSince >= idleMs) return;
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength > maxEvents) {
      await continueAsNew<typeof fleetLimit>({ state: s, requests: inbox, tuning: init.tuning });
    }
    const wakeAt = nextLeaseEnd(s) ?? (s.queue.length ? undefined : idleSince + idleMs);
    const seen = released;
    const woke = () => inbox.length > 0 || released !== seen;
    if (wakeAt === undefined) await condition(woke);
    else await condition(woke, Math.max(1, wakeAt - Date.now()));
  }
}

/**
 * Everything the queue owes now, as signals in flight: answers to new requests, grants to the
 * next in line (reserved before the signal goes out, so grants in flight count against the
 * limit), and a look at each holder past its lease. Drains `inbox`.
 */
function settle(s: LimitState, inbox: LimitRequest[]): Promise<void>[] {
  const answers: Promise<void>[] = [];
  for (let r = inbox.shift(); r; r = inbox.shift()) {
    const req = r;
    // A lock (a request that does not wait) asking an idle one: it is ending, and its end is
    // awaited by the run that started it, so it serves nobody new: that run starts its own.
    if (req.queue === false && !s.held.length && !s.queue.length) {
      answers.push(tell(req, 'ended').then(() => undefined));
      continue;
    }
    const out = requestTurn(s, req);
    // 'taken' (a request that does not wait): refused only once every holder was found running.
    if (out === 'taken') answers.push(letClosedHoldersGo(s).then(() => (requestTurn(s, req) === 'taken' ? tell(req, 'refused').then(() => undefined) : undefined)));
    // 'held': a repeated request whose grant is standing; telling again costs one signal.
    else if (out !== 'queued') answers.push(tell(req, out === 'held' ? 'granted' : 'refused').then(() => undefined));
  }
  for (let r = nextTurn(s); r; r = nextTurn(s)) {
    const req = r;
    grant(s, req, Date.now());
    answers.push(
      tell(req, 'granted').then((delivered) => {
        if (!delivered) releaseTurn(s, req.ticket);
      }),
    );
  }
  for (const h of pastLease(s, Date.now())) {
    answers.push(
      // By workflow id, not run: a run a Reset made past its grant replays that grant as its
      // own without asking again (its ticket is the replaced run's), and still holds it.
      stillRuns({ workflowId: h.workflowId }).then((runs) => {
        if (runs) renewLease(s, h.ticket, Date.now());
        else releaseTurn(s, h.ticket);
      }),
    );
  }
  return answers;
}

/** Each grant whose holder has no open run (by workflow id, as past a lease) ends. */
async function letClosedHoldersGo(s: LimitState): Promise<void> {
  await Promise.all(
    s.held.map((h) =>
      stillRuns({ workflowId: h.workflowId }).then((runs) => {
        if (!runs) releaseTurn(s, h.ticket);
      }),
    ),
  );
}

/** A signal to a closed run fails "not found": that run is gone and can hold nothing. */
export async function tell(req: LimitRequest, answer: LimitAnswer): Promise<boolean> {
  try {
    await getExternalWorkflowHandle(req.workflowId, req.runId).signal(limitAnswerSignal, { ticket: req.ticket, answer });
    return true;
  } catch (err) {
    return !/not found/i.test(String((err as Error)?.message ?? err));
  }
}

/** Smaller values let a test see the idle end and continue-as-new; runs never pass them. */
export interface LimitTuning {
  idleMs?: number;
  maxEvents?: number;
}

const IDLE_MS = 30_000;
/** ~7 events a run (request, release, grant): a run of the limit serves ~250 runs, and a new worker replays at most that. */
const MAX_EVENTS = 2000;
