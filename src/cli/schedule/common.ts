import { ScheduleAlreadyRunning, ScheduleNotFoundError } from '@temporalio/client';
import type { RetentionPolicy } from '../../model/retention';
import { CliError, Exit } from '../exit-codes';
import { NamespaceNotPreparedError, missingSearchAttributesIn } from '../../temporal-namespace';
import { temporalFailure } from '../service-errors';
import { namespaceDialed } from '../temporal-client-namespace';

/**
 * What `schedule create` records in the schedule's memo. Temporal's UpdateSchedule cannot change a
 * schedule's memo, so only what `schedule update` never changes is read from it (domain, host);
 * the spec and the retention are read from the schedule itself.
 */
export interface ScheduleMemo {
  domain: string;
  host: string;
  /** "every 1h" / "cron 0 3 * * *" as the operator gave it at create. */
  spec: string;
  retention?: RetentionPolicy;
}

export const MEMO_KEY = 'vmsnap';
export const WORKFLOW_TYPE = 'consistentSnapshot';

/** Workflow id prefix of a schedule's runs; Temporal appends the scheduled time. */
export function runIdPrefix(scheduleId: string): string {
  return `sched-${scheduleId}`;
}

/** Server answers → exit codes: unknown or duplicate ids and rejected specs are the caller's input. */
export function scheduleFailure(scheduleId: string, doing: string, err: unknown): CliError {
  if (err instanceof CliError) return err;
  // An unprepared namespace is not this schedule's fault: the one line naming `vmsnap setup`.
  const missing = missingSearchAttributesIn(err);
  if (missing) return new CliError(new NamespaceNotPreparedError(namespaceDialed(), missing).message, Exit.unreachable, 'NamespaceNotPrepared');
  if (err instanceof ScheduleNotFoundError) return new CliError(`no schedule "${scheduleId}"`, Exit.badInput, 'NotFound');
  if (err instanceof ScheduleAlreadyRunning) {
    return new CliError(`schedule "${scheduleId}" already exists (delete it first, or choose another id)`, Exit.badInput, 'AlreadyExists');
  }
  return temporalFailure(`cannot ${doing} schedule "${scheduleId}"`, err);
}

export function memoOf(memo: Record<string, unknown> | undefined): ScheduleMemo | undefined {
  const m = memo?.[MEMO_KEY];
  return m && typeof m === 'object' ? (m as ScheduleMemo) : undefined;
}
