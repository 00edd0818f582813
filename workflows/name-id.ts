import { ApplicationFailure } from '@temporalio/common';
import { workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';

/**
 * The id every name of a run derives from: its own, or its fleet router's (`routedBy`), so a run
 * the router placed on a host keeps the names of the id the caller started. Honoured only from the
 * parent that set it: a caller who typed another run's id would otherwise take over that run's names.
 */
export function nameIdOf(input: { routedBy?: string }): string {
  const info = workflowInfo();
  if (!input.routedBy) return info.workflowId;
  if (input.routedBy !== info.parent?.workflowId) {
    throw ApplicationFailure.nonRetryable('invalid input: routedBy is set only by the fleet router, for its own child run', FailureType.InvalidInput);
  }
  return input.routedBy;
}
