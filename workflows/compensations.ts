import { CancellationScope, log } from '@temporalio/workflow';
import { ApplicationFailure } from '@temporalio/common';

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

  async run(): Promise<void> {
    const failed: string[] = [];
    await CancellationScope.nonCancellable(async () => {
      for (const step of [...this.urgent, ...this.steps]) {
        try {
          await step.run();
        } catch (err) {
          log.error('compensation failed', { step: step.name, error: String(err) });
          failed.push(`${step.name}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    });
    if (failed.length) {
      throw ApplicationFailure.nonRetryable(`compensation failed: ${failed.join('; ')}`, 'CompensationFailed');
    }
  }
}
