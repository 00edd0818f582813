/**
 * The pre-flush: before its freeze, vmsnap asks the guest to write back what it holds dirty (a
 * `sync` run through the agent's guest-exec), so the freeze call — which cannot return before every
 * frozen filesystem's dirty pages are on disk — has only what was dirtied since. It is not a freeze:
 * nothing is held, the guest goes on writing, and it ends before the freeze's guard is armed, so it
 * is outside the window, the deadline and everything `quiesced` is judged on. It can only shorten
 * the window; a pre-flush that fails or runs out of time costs at most its bound and is reported.
 * Pure rules here; the agent calls are in activities/pre-flush.ts.
 */

/** config preFlushTimeoutMs's default: a sync of the lab guest's ~16 MiB dirty limit took 30–350 ms (bench/README.md). */
export const PRE_FLUSH_TIMEOUT_MS = 1000;

/** The worker's pre-flush settings (config preFlushCommand, preFlushTimeoutMs > 0). */
export interface PreFlushSettings {
  /** argv run in the guest through guest-exec; qemu-ga searches its PATH for argv[0]. */
  command: string[];
  /** How long to wait for it to exit. */
  timeoutMs: number;
}

/**
 * How a pre-flush ended: `done` (exit 0), `failed` (the agent refused or could not start it, or it
 * exited non-zero), `timeout` (still running when its time was up: it goes on in the guest beside
 * the freeze), `skipped` (the freeze activity had no time to spare for it).
 */
export type PreFlushOutcome = 'done' | 'failed' | 'timeout' | 'skipped';

export interface PreFlushResult {
  outcome: PreFlushOutcome;
  /** Worker clock, ms since epoch: guest-exec sent → the last answer. */
  startedAt: number;
  returnedAt: number;
  ms: number;
  exitCode?: number;
  /** Why it failed: the agent's error or the command's own stderr, shortened. */
  error?: string;
}

/**
 * libvirt's shortest agent timeout (whole seconds): each agent call of the pre-flush may hold
 * libvirtd's per-domain agent job, which the freeze call then waits for, this long at most.
 */
export const PRE_FLUSH_AGENT_CALL_SEC = 1;

/** Client-side limit on one pre-flush agent call: libvirt's own answer (86 at 1 s) comes first. */
export const PRE_FLUSH_CALL_TIMEOUT_MS = 2000;

/**
 * The time the pre-flush may wait in this freeze activity: the configured wait, less whatever the
 * activity needs after it — arming the guard, the freeze call at its own agent timeout — and one
 * agent call's tail, so the pre-flush can never push the freeze past the activity's time limit.
 * 0: no time to spare; skip it. `activityLeftMs` undefined: no limit known.
 */
export function preFlushBudgetMs(o: { timeoutMs: number; activityLeftMs?: number; freezeNeedsMs: number }): number {
  if (o.timeoutMs <= 0) return 0;
  if (o.activityLeftMs === undefined) return o.timeoutMs;
  const spare = o.activityLeftMs - o.freezeNeedsMs - PRE_FLUSH_CALL_TIMEOUT_MS;
  return Math.max(0, Math.min(o.timeoutMs, Math.floor(spare)));
}

/**
 * What the freeze activity needs after the pre-flush, at worst: the agent-timeout and guard steps
 * (a few seconds, bounded by the guard's 1.5 s readiness wait) and the freeze call's own limit.
 */
export function freezeNeedsMs(agentTimeoutSec: number): number {
  return 3000 + agentTimeoutSec * 1000 + 2000;
}

/**
 * Delay before the n-th guest-exec-status poll (n from 0): short at first, because a sync with
 * little to write exits within milliseconds and every poll's wait is added to the pre-flush; never
 * past the time left.
 */
export function pollDelayMs(n: number, leftMs: number): number {
  return Math.max(0, Math.min(5 * 2 ** Math.min(n, 10), 100, leftMs));
}

/** The outcome of an exited command, by qemu-ga's guest-exec-status. */
export function exitOutcome(s: { exitCode?: number; signal?: number; stderr?: string }): Pick<PreFlushResult, 'outcome' | 'exitCode' | 'error'> {
  if (s.exitCode === 0) return { outcome: 'done', exitCode: 0 };
  const how = s.signal !== undefined ? `killed by signal ${s.signal}` : `exit ${s.exitCode ?? 'unknown'}`;
  const said = s.stderr?.trim();
  return {
    outcome: 'failed',
    ...(s.exitCode !== undefined ? { exitCode: s.exitCode } : {}),
    error: shorten(said ? `${how}: ${said}` : how),
  };
}

export function shorten(s: string, max = 300): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}
