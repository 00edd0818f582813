/**
 * A fleet limit (freeze windows per host, snapshots per Ceph cluster) as one FIFO queue per
 * scope, held by a limit workflow (workflows/fleet-limit.ts). A run asks once and is told when its
 * turn comes (a signal): nobody polls, the oldest waiter is served first, and the limit's own
 * workflow sees only the runs of its scope. A VM's domain lock is the same limit with n = 1 and
 * no queue. Pure: the workflow and its tests share this.
 */

/** `lock`: a VM's domain lock, a limit of one without a queue (workflows/domain-lock.ts). */
export type LimitKind = 'window' | 'snap' | 'lock';

export interface LimitHolder {
  workflowId: string;
  runId: string;
  /** One per run and limit: a repeated request (a retried signal) is the same request. */
  ticket: string;
  /** How long a grant stands before the limit asks whether its holder still runs. */
  leaseMs: number;
}

export interface LimitRequest extends LimitHolder {
  /** The limit as the asking host's configuration has it; the latest request's value applies. */
  n: number;
  /**
   * `false`: this request does not wait. When no grant is free it is refused at once (after the
   * limit has looked whether its holders still run), never queued. The domain lock asks so.
   */
  queue?: boolean;
}

export interface LimitState {
  n: number;
  queue: LimitRequest[];
  held: (LimitHolder & { until: number })[];
}

/**
 * Waiters beyond this are refused (FleetBusy, retryable) rather than queued: the queue travels in
 * continue-as-new, so it must stay well under Temporal's 2 MB payload limit (~150 bytes each).
 */
export const MAX_WAITERS = 2000;

export function emptyLimit(): LimitState {
  return { n: 1, queue: [], held: [] };
}

export function limitWorkflowId(kind: LimitKind, scope: string): string {
  return `vmsnap-limit-${kind}-${scope}`;
}

/**
 * Named by the run's first run id, which a Reset copies (its start event is copied): a reset run
 * replays the replaced run's answers as its own, and a grant it replays is released by its ticket.
 */
export function limitTicket(firstRunId: string, kind: LimitKind): string {
  return `${firstRunId}/${kind}`;
}

/**
 * A limit started by its first request, which holds its grant from the start: a limit without a
 * queue is granted by starting it (the start fails while it runs: one open execution per id).
 */
export function heldFromStart(req: LimitRequest, now: number): LimitState {
  const s: LimitState = { n: req.n, queue: [], held: [] };
  grant(s, req, now);
  return s;
}

/**
 * Adds a request. A request of a workflow id whose earlier run is in the queue or holds a grant
 * replaces that run: only one run of a workflow id is open at a time (a Reset, a retry after a
 * worker crash), so the earlier one can neither use nor release what it had.
 *
 * `taken`: a request that does not queue (`queue: false`) found every grant held (or promised
 * to one in line). The limit looks whether the holders still run, lets the closed ones go and
 * asks again; `taken` then is the refusal.
 */
export function requestTurn(s: LimitState, req: LimitRequest): 'queued' | 'held' | 'full' | 'taken' {
  if (!Number.isInteger(req.n) || req.n < 1) throw new RangeError(`limit must be a positive integer, got ${req.n}`);
  s.n = req.n;
  const replaced = (e: LimitHolder) => e.workflowId === req.workflowId && e.runId !== req.runId;
  s.queue = s.queue.filter((e) => !replaced(e));
  s.held = s.held.filter((e) => !replaced(e));
  if (s.held.some((e) => e.ticket === req.ticket)) return 'held';
  if (s.queue.some((e) => e.ticket === req.ticket)) return 'queued';
  if (req.queue === false && s.held.length + s.queue.length >= s.n) return 'taken';
  if (s.queue.length >= MAX_WAITERS) return 'full';
  s.queue.push(req);
  return 'queued';
}

/** Ends a grant or withdraws a request; an unknown ticket is fine (already ended). */
export function releaseTurn(s: LimitState, ticket: string): void {
  s.queue = s.queue.filter((e) => e.ticket !== ticket);
  s.held = s.held.filter((e) => e.ticket !== ticket);
}

/** The oldest waiter, if a grant is free; taken off the queue (the caller grants or drops it). */
export function nextTurn(s: LimitState): LimitRequest | undefined {
  return s.held.length < s.n ? s.queue.shift() : undefined;
}

export function grant(s: LimitState, req: LimitRequest, now: number): void {
  s.held.push({ workflowId: req.workflowId, runId: req.runId, ticket: req.ticket, leaseMs: req.leaseMs, until: now + req.leaseMs });
}

/** Grants past their lease: the limit asks their holders whether they still run. */
export function pastLease(s: LimitState, now: number): LimitState['held'] {
  return s.held.filter((e) => e.until <= now);
}

export function renewLease(s: LimitState, ticket: string, now: number): void {
  for (const e of s.held) if (e.ticket === ticket) e.until = now + e.leaseMs;
}

/** When the limit next has to look at a lease, or undefined when nothing is held. */
export function nextLeaseEnd(s: LimitState): number | undefined {
  return s.held.length ? Math.min(...s.held.map((e) => e.until)) : undefined;
}
