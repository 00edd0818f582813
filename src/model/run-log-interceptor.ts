import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';
import { domainOfInput } from './run-log-fields';
import type { RunLogFields } from './run-log-fields';

/*
 * Workflow code (bundled with both queues' workflows as a workflow interceptor module): the SDK puts
 * workflowId and runId on every workflow log line; this adds the domain the run's input names, so a
 * compensation's or a lock's line can be found by VM as well as by run.
 */

export const interceptors: WorkflowInterceptorsFactory = () => {
  let fields: RunLogFields = {};
  return {
    inbound: [
      {
        execute(input, next) {
          fields = domainOfInput(input.args[0]);
          return next(input);
        },
      },
    ],
    outbound: [{ getLogAttributes: (input, next) => next({ ...fields, ...input }) }],
  };
};
