import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../src/model/failures';

/** A request checked before anything happens: its parsed input, or InvalidInput, which no retry can mend. */
export function checkedInput<T>(parsed: { ok: true; input: T } | { ok: false; message: string }): T {
  if (!parsed.ok) throw ApplicationFailure.nonRetryable(`invalid input: ${parsed.message}`, FailureType.InvalidInput);
  return parsed.input;
}
