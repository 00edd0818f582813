import { ApplicationFailure, CancelledFailure, TemporalFailure, TerminatedFailure, TimeoutFailure } from '@temporalio/common';
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

export function exitCodeFor(err: WorkflowFailedError): number {
  const { type } = describeFailure(err);
  if (type === 'Cancelled') return Exit.cancelled;
  if (type === 'Terminated' || type === 'Timeout') return Exit.terminated;
  if (BAD_INPUT.has(type)) return Exit.badInput;
  return Exit.failed;
}
