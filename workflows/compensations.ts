import { CancellationScope, log } from '@temporalio/workflow';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../src/model/failures';
import { failureType, messageOf } from './failure-of';

type Step = { name: string; run: () => Promise<void> };

/**
 * Undo steps registered before the action they undo. `urgent` steps (the thaw) run first, the
 * rest in reverse order of registration, all in a non-cancellable scope so an operator's cancel
 * cannot interrupt them. A failing step does not stop the others, and is never swallowed: the
 * failures are rethrown together once every step has had its turn.
 */
export class Compensations {
  private readonly urgent: Step[] = [];
  private readonly steps: Step[] = [];

  addUrgent(name: string, run: () => Promise<void>): void {
    this.urgent.push({ name, run });
  }

  add(name: string, run: () => Promise<void>): void {
    this.steps.unshift({ name, run });
  }

  /**
   * Runs every step. `reason` is the error that made the run compensate: when a step fails too,
   * the CompensationFailed thrown keeps `reason` as its cause, so why the run failed is never
   * replaced by what its cleanup hit; the steps' failures are in the message and the details.
   */
  async run(reason?: unknown): Promise<void> {
    const failed: { step: string; err: unknown }[] = [];
    await CancellationScope.nonCancellable(async () => {
      for (const step of [...this.urgent, ...this.steps]) {
        try {
          await step.run();
        } catch (err) {
          log.error('compensation failed', { step: step.name, error: String(err) });
          failed.push({ step: step.name, err });
        }
      }
    });
    if (failed.length) {
      throw ApplicationFailure.create({
        message: `compensation failed: ${failed.map((f) => `${f.step}: ${messageOf(f.err)}`).join('; ')}`,
        type: FailureType.CompensationFailed,
        nonRetryable: true,
        details: failed.map((f) => ({ step: f.step, type: failureType(f.err), message: messageOf(f.err) })),
        cause: reason instanceof Error ? reason : undefined,
      });
    }
  }
}
