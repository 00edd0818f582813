import { ApplicationFailure, CancelledFailure, ChildWorkflowFailure, TemporalFailure, TerminatedFailure, TimeoutFailure } from '@temporalio/common';
import type { WorkflowFailedError } from '@temporalio/client';
import { Exit } from './exit-codes';

const BAD_INPUT = new Set([
  'InvalidInput', 'DomainNotFound', 'UnsupportedDisk', 'NameConflict', 'PoolUnavailable',
  'RestorePointNotFound', 'RestorePointIncomplete', 'DomainRunning', 'RestoreRecordUntrusted', 'DefinitionRefused',
]);

export function describeFailure(err: WorkflowFailedError): { type: string; message: string } {
  let e: unknown = err.cause;
  while (e instanceof TemporalFailure) {
    if (e instanceof ApplicationFailure) return { type: e.type ?? 'ApplicationFailure', message: e.message };
    if (e instanceof CancelledFailure) return { type: 'Cancelled', message: e.message };
    if (e instanceof TerminatedFailure) return { type: 'Terminated', message: e.message };
    if (e instanceof TimeoutFailure) return { type: 'Timeout', message: e.message };
    if (!e.cause) return { type: e.name, message: e.message };
    e = e.cause;
  }
  return { type: 'Unknown', message: err.message };
}

/**
 * How the run itself ended decides: the client puts a TimeoutFailure or TerminatedFailure right
 * under the error when the run timed out or was terminated (5), a CancelledFailure when it was
 * cancelled (3); so does a router whose run on the VM's host ended so (a ChildWorkflowFailure).
 * A run that failed because one of its steps (an activity) timed out failed (1).
 */
export function exitCodeFor(err: WorkflowFailedError): number {
  let end: unknown = err.cause;
  while (end instanceof ChildWorkflowFailure) end = end.cause;
  if (end instanceof TimeoutFailure || end instanceof TerminatedFailure) return Exit.terminated;
  if (end instanceof CancelledFailure) return Exit.cancelled;
  const { type } = describeFailure(err);
  if (BAD_INPUT.has(type)) return Exit.badInput;
  return Exit.failed;
}
