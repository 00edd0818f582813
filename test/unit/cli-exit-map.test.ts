import { ApplicationFailure, ActivityFailure, CancelledFailure, ChildWorkflowFailure, RetryState, TerminatedFailure, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { exitCodeFor } from '../../src/cli/failure-exit';
import { temporalExit } from '../../src/cli/service-errors';

/*
 * The exit code of a run's end and of a Temporal call's error, decided from the failure's kind.
 * The lab tests (cli-exit-codes.test.ts) produce the ones a real server can give there: a run that
 * timed out, a terminated run, a server that goes away after the connection was made.
 */

const failed = (cause: Error) => new WorkflowFailedError('Workflow execution failed', cause, RetryState.NON_RETRYABLE_FAILURE);
const timeout = () => new TimeoutFailure('timed out', undefined, TimeoutType.START_TO_CLOSE);

describe('exitCodeFor: how the run ended', () => {
  it.each([
    ['the run timed out', 5, failed(timeout())],
    ['the run was terminated', 5, failed(new TerminatedFailure('terminated'))],
    ['the run was cancelled', 3, failed(new CancelledFailure('cancelled'))],
    ['the run on the VM’s host timed out (a router’s child)', 5, failed(new ChildWorkflowFailure('default', { workflowId: 'x', runId: 'y' }, 'consistentSnapshot', RetryState.TIMEOUT, timeout()))],
    ['a step (activity) timed out and the run failed', 1, failed(new ActivityFailure('failed', 'snapshot', '1', RetryState.MAXIMUM_ATTEMPTS_REACHED, 'id', timeout()))],
    ['a typed failure', 1, failed(ApplicationFailure.nonRetryable('no agent', 'QuiesceUnavailable'))],
    ['bad input', 2, failed(ApplicationFailure.nonRetryable('no such domain', 'DomainNotFound'))],
  ])('%s → %d', (_what, code, err) => {
    expect(exitCodeFor(err)).toBe(code);
  });
});

/** What grpc-js rejects a call with: a numeric status code and trailers. */
function grpcError(code: number): Error {
  return Object.assign(new Error(`${code} status`), { code, details: 'x', metadata: {} });
}

describe('temporalExit: what a Temporal call’s error says about the exit code', () => {
  it.each([
    [3, 2], [5, 2], [6, 2], [9, 2], // the request: INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION
    [4, 4], [14, 4], // the server is not there: DEADLINE_EXCEEDED, UNAVAILABLE
    [7, 6], [16, 6], // it is there and says no: PERMISSION_DENIED, UNAUTHENTICATED
    [13, 1], [2, 1], // anything else failed: INTERNAL, UNKNOWN
  ])('gRPC status %d → exit %d', (status, code) => {
    expect(temporalExit(grpcError(status))).toBe(code);
    // As the SDK wraps it (ServiceError with the grpc error as its cause).
    expect(temporalExit(Object.assign(new Error('Failed to describe workflow'), { name: 'ServiceError', cause: grpcError(status) }))).toBe(code);
  });
});
