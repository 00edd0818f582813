import { ApplicationFailure, CancelledFailure, TemporalFailure, TimeoutFailure } from '@temporalio/common';

/*
 * A snapshot run's end as its host's worker counts it (vmsnap_runs_total and the series that follow
 * from a success). Pure: the workflow interceptor (./run-end-interceptor.ts) classifies with it in
 * the sandbox, and the tests without one.
 */

export type RunOutcome = 'succeeded' | 'failed' | 'cancelled';

export interface RunEnd {
  outcome: RunOutcome;
  /** A failed run's ApplicationFailure type (`Timeout` for a timeout not turned into one); absent when unknown. */
  failureType?: string;
  /** A succeeded run's VM, by name. */
  domain?: string;
  quiesced?: boolean;
  /** The run reused what an earlier run of its workflow id made: no new snapshot. */
  reused?: boolean;
}

/** The sink a run's end reaches its worker by (registered in src/worker/run-worker.ts). */
// A type, not an interface: the SDK's Sinks constraint wants an index signature.
export type RunSinks = { vmsnapRuns: { ended(end: RunEnd): void } };

/** A run that returned `result` (a SnapshotResult). */
export function succeededRun(result: unknown): RunEnd {
  const r = (result ?? {}) as { domain?: { name?: unknown }; quiesced?: unknown; reusedExisting?: unknown };
  return {
    outcome: 'succeeded',
    ...(typeof r.domain?.name === 'string' ? { domain: r.domain.name } : {}),
    quiesced: r.quiesced === true,
    reused: r.reusedExisting === true,
  };
}

/**
 * A run that threw `err`; undefined when that does not end the run: anything but a Temporal
 * failure fails the workflow task, which is retried, not the run (and continue-as-new goes on).
 */
export function failedRun(err: unknown): RunEnd | undefined {
  if (!(err instanceof TemporalFailure)) return undefined;
  for (let e: unknown = err; e instanceof TemporalFailure; e = e.cause) {
    if (e instanceof CancelledFailure) return { outcome: 'cancelled' };
    if (e instanceof ApplicationFailure) return { outcome: 'failed', ...(e.type ? { failureType: e.type } : {}) };
    if (e instanceof TimeoutFailure) return { outcome: 'failed', failureType: 'Timeout' };
  }
  return { outcome: 'failed' };
}
