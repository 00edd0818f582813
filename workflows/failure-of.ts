import { ApplicationFailure, TemporalFailure } from '@temporalio/common';
import { saysFreezeNotSent } from '../src/model/failures';

/*
 * A failure as workflow code reads it: the type and message of the ApplicationFailure under the
 * activity, child or timeout wrappers Temporal puts around it. Translation into these types
 * happens once, at the activity edge (activities/failures.ts); workflows only read them.
 */

/** The innermost ApplicationFailure's type, or undefined (a timeout, a cancellation). */
export function failureType(err: unknown): string | undefined {
  let e: unknown = err;
  while (e instanceof TemporalFailure) {
    if (e instanceof ApplicationFailure) return e.type ?? undefined;
    e = e.cause;
  }
  return undefined;
}

/** The freeze step marked its failure FREEZE_NOT_SENT (activities/freeze.ts). */
export function freezeNotSent(err: unknown): boolean {
  let e: unknown = err;
  while (e instanceof TemporalFailure) {
    if (e instanceof ApplicationFailure) return saysFreezeNotSent(e.details);
    e = e.cause;
  }
  return false;
}

/** The innermost cause's message. */
export function messageOf(err: unknown): string {
  let e: unknown = err;
  while (e instanceof TemporalFailure && e.cause) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
