import { ScheduleAlreadyRunning, ScheduleNotFoundError, isGrpcServiceError } from '@temporalio/client';
import { CliError, Exit } from '../exit-codes';
import { NamespaceNotPreparedError, missingSearchAttributesIn } from '../../temporal-namespace';
import { namespaceDialed } from '../temporal-client-namespace';

/** What `schedule create` records in the schedule's memo, so list/describe can show it plainly. */
export interface ScheduleMemo {
  domain: string;
  host: string;
  /** "every 1h" / "cron 0 3 * * *" as the operator gave it (the server stores cron as calendars). */
  spec: string;
  retention?: { keepLast?: number; keepDaily?: number };
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
  if (missing) return new CliError(new NamespaceNotPreparedError(namespaceDialed(), missing).message, Exit.unreachable);
  if (err instanceof ScheduleNotFoundError) return new CliError(`no schedule "${scheduleId}"`, Exit.badInput);
  if (err instanceof ScheduleAlreadyRunning) {
    return new CliError(`schedule "${scheduleId}" already exists (delete it first, or choose another id)`, Exit.badInput);
  }
  const msg = `cannot ${doing} schedule "${scheduleId}": ${(err as Error).message}`;
  const code = grpcCode(err);
  // 3 INVALID_ARGUMENT, 5 NOT_FOUND, 6 ALREADY_EXISTS; 4 DEADLINE_EXCEEDED, 14 UNAVAILABLE
  if (code !== undefined && [3, 5, 6].includes(code)) return new CliError(msg, Exit.badInput);
  if (code !== undefined && [4, 14].includes(code)) return new CliError(msg, Exit.unreachable);
  return new CliError(msg, Exit.failed);
}

/** The gRPC status code under the client's ServiceError wrapping, if any. */
export function grpcCode(err: unknown): number | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (isGrpcServiceError(e)) return e.code;
  }
  return undefined;
}

export function memoOf(memo: Record<string, unknown> | undefined): ScheduleMemo | undefined {
  const m = memo?.[MEMO_KEY];
  return m && typeof m === 'object' ? (m as ScheduleMemo) : undefined;
}
