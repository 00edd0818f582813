import { proxySinks, workflowInfo } from '@temporalio/workflow';
import type { Next, WorkflowExecuteInput, WorkflowInboundCallsInterceptor, WorkflowInterceptorsFactory } from '@temporalio/workflow';
import { FLEET_TASK_QUEUE } from './fleet';
import { failedRun, succeededRun } from './run-end';
import type { RunSinks } from './run-end';

/*
 * Workflow code (bundled with workflows/ by the worker and by scripts/build.mjs as a workflow
 * interceptor module): tells the worker when a snapshot run ends, through a sink — a call out of
 * the sandbox that is not recorded in the history and not made on replay, so each end is counted
 * once, by the worker whose workflow task ended the run. Only the host part of a run: a fleet
 * run's router (on the fleet queue) ends with its host child, which counts itself.
 */

const { vmsnapRuns } = proxySinks<RunSinks>();

class RunEnds implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    let result: unknown;
    try {
      result = await next(input);
    } catch (err) {
      const end = failedRun(err);
      if (end) vmsnapRuns.ended(end);
      throw err;
    }
    vmsnapRuns.ended(succeededRun(result));
    return result;
  }
}

export const interceptors: WorkflowInterceptorsFactory = () => {
  const { workflowType, taskQueue } = workflowInfo();
  return workflowType === 'consistentSnapshot' && taskQueue !== FLEET_TASK_QUEUE ? { inbound: [new RunEnds()] } : {};
};
