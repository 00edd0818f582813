import { expect } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';

/** The ApplicationFailure a failed workflow ended with (its `type` is what schedulers branch on). */
export async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  let c: unknown = (err as WorkflowFailedError).cause;
  while (c && !(c instanceof ApplicationFailure)) c = (c as { cause?: unknown }).cause;
  expect(c).toBeInstanceOf(ApplicationFailure);
  return c as ApplicationFailure;
}
