import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { workflowsPath } from '../../src/worker/workflows-path';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The workflow bundle built from today's workflows/, once per run of the unit lane. */
    workflowBundle: string;
  }
}

/*
 * webpack takes seconds on a 2-core host: the replay test and the workflow tests share one
 * bundle, built here in vitest's main process and handed to each test file by inject().
 */
export default async function setup(project: TestProject): Promise<void> {
  const { code } = await bundleWorkflowCode({ workflowsPath: workflowsPath(), logger: quiet });
  project.provide('workflowBundle', code);
}

const noop = () => undefined;
const quiet = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop };
