import { Context } from '@temporalio/activity';
import type { Info } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { domainOfInput } from '../model/run-log-fields';
import type { RunLogFields } from '../model/run-log-fields';
import { withFields } from './logger';
import type { Logger } from './logger';

/*
 * An activity's log lines name the run it works for. Two writers, one set of fields: vmsnap's own
 * lines (the activity's `deps.log`, bound per execution by {@link boundToRun}) and the SDK's
 * activity logger ("Activity failed", `Context.log`), through {@link activityLogInterceptor}.
 */

/** The run an activity execution works for, and the domain its input names. */
export function activityRunFields(info: Info, input: unknown): RunLogFields & { activityType: string } {
  const run = info.workflowExecution ? { workflowId: info.workflowExecution.workflowId, runId: info.workflowExecution.runId } : {};
  return { ...run, ...domainOfInput(input), activityType: info.activityType };
}

/**
 * `log` bound to the activity execution under way, for a call whose first argument is `input`.
 * Outside an activity (a test calling the function directly) it is `log` itself.
 */
export function boundToRun(log: Logger, input: unknown): Logger {
  let info: Info;
  try {
    info = Context.current().info;
  } catch {
    return log;
  }
  return withFields(log, activityRunFields(info, input));
}

/**
 * The SDK's activity lines carry workflowId and `workflowRunId`; this adds `runId` (the name the
 * workflow lines and ours use) and the domain. The domain is known once the input is decoded, so
 * the SDK's "Activity started" line, written before, has the run but not the domain.
 */
export const activityLogInterceptor: ActivityInterceptorsFactory = (ctx) => {
  let fields = activityRunFields(ctx.info, undefined);
  return {
    inbound: {
      execute(input, next) {
        fields = activityRunFields(ctx.info, input.args[0]);
        return next(input);
      },
    },
    outbound: { getLogAttributes: (attrs, next) => next({ ...attrs, ...fields }) },
  };
};
