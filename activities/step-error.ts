import { ApplicationFailure, TemporalFailure } from '@temporalio/common';
import type { FailureType } from '../src/model/failures';

/**
 * For a step whose failure has one type whatever its cause (a failed thaw is `ThawFailed`, be it a
 * libvirt timeout or a dead agent): that type, and the cause's types that stay as they are.
 */
export interface StepFailure {
  readonly type: FailureType;
  readonly nonRetryable: boolean;
  /** Cause types more telling than `type` (e.g. QuiesceUnavailable under FreezeFailed). */
  readonly keep?: readonly FailureType[];
}

/**
 * An error an activity step hit, annotated where it happened with what the activity was doing.
 * Activities never translate adapter errors themselves: the edge (failures.ts) turns this into
 * the ApplicationFailure, from `cause`'s native code and, when given, `as`.
 */
export class StepError extends Error {
  override readonly name = 'StepError';

  constructor(
    readonly doing: string,
    override readonly cause: unknown,
    readonly as?: StepFailure,
    /** Facts the workflow branches on, added to the failure's details (e.g. FREEZE_NOT_SENT). */
    readonly facts?: Readonly<Record<string, unknown>>,
  ) {
    super(`${doing}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/**
 * Runs one step of an activity; what it throws reaches the edge as a {@link StepError} saying
 * `doing`. A failure the step decided itself (an ApplicationFailure) passes through unless `as`
 * gives the step one type; cancellation always passes through.
 */
export async function during<T>(doing: string, fn: () => Promise<T>, as?: StepFailure): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isCancellation(err) || (err instanceof ApplicationFailure && !as)) throw err;
    throw new StepError(doing, err, as);
  }
}

/** Temporal's own failures (cancellation) and aborts: the worker reports them, nobody retypes them. */
export function isCancellation(err: unknown): boolean {
  return (err instanceof TemporalFailure && !(err instanceof ApplicationFailure)) || (err instanceof Error && err.name === 'AbortError');
}
