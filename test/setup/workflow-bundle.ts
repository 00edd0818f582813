import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { fleetWorkflowsPath, workflowsPath } from '../../src/worker/workflows-path';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The host queues' workflow bundle built from today's workflows/, once per run of the unit lane. */
    workflowBundle: string;
    /** The fleet queue's (workflows/fleet.ts: the routers), built alongside. */
    fleetWorkflowBundle: string;
  }
}

/*
 * webpack takes seconds on a 2-core host: the replay test and the workflow tests share the
 * bundles, built here in vitest's main process and handed to each test file by inject().
 */
export default async function setup(project: TestProject): Promise<void> {
  const [host, fleet] = await Promise.all([
    bundleWorkflowCode({ workflowsPath: workflowsPath(), logger: quiet }),
    bundleWorkflowCode({ workflowsPath: fleetWorkflowsPath(), logger: quiet }),
  ]);
  project.provide('workflowBundle', host.code);
  project.provide('fleetWorkflowBundle', fleet.code);
}

const noop = () => undefined;
const quiet = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop };
