import { ApplicationFailure, ChildWorkflowFailure } from '@temporalio/common';

/** A routed child's own failure, so the router's caller sees the same type as from a run on a host queue. */
export function unwrapChild(err: unknown): unknown {
  if (err instanceof ChildWorkflowFailure && err.cause instanceof ApplicationFailure) return err.cause;
  return err;
}
