import { existsSync } from 'node:fs';
import path from 'node:path';
import type { WorkerOptions } from '@temporalio/worker';

/** Entry of the workflow bundle, whether we run from sources (tsx, vitest) or compiled output. */
export function workflowsPath(): string {
  const ts = path.resolve(__dirname, '../../workflows/index.ts');
  return existsSync(ts) ? ts : path.resolve(__dirname, '../../workflows/index.js');
}

/**
 * Entry of the fleet queue's bundle (workflows/fleet.ts): the same workflow types, with
 * consistentSnapshot and restoreVm as the routers that find a VM's host.
 */
export function fleetWorkflowsPath(): string {
  const ts = path.resolve(__dirname, '../../workflows/fleet.ts');
  return existsSync(ts) ? ts : path.resolve(__dirname, '../../workflows/fleet.js');
}

/**
 * The workflow interceptor module that tells the worker each snapshot run's end (a sink), bundled
 * beside the workflows: by the SDK at start from sources, by scripts/build.mjs into the prebuilt bundle.
 */
export function runEndInterceptorPath(): string {
  const ts = path.resolve(__dirname, '../model/run-end-interceptor.ts');
  return existsSync(ts) ? ts : path.resolve(__dirname, '../model/run-end-interceptor.js');
}

/**
 * The compiled build ships dist/workflow-bundle.js, bundled by `npm run build` from the same
 * sources (bin/vmsnap.js runs dist/ only when its stamp matches). Loading it keeps webpack out of
 * the worker process: ~140 MiB less RSS. From sources the SDK bundles at start, as before.
 */
export function workflowCode(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const prebuilt = path.resolve(__dirname, '../../workflow-bundle.js');
  if (path.extname(__filename) === '.js' && existsSync(prebuilt)) return { workflowBundle: { codePath: prebuilt } };
  return { workflowsPath: workflowsPath() };
}

/** The fleet queue's workflow code: dist/fleet-workflow-bundle.js when running the compiled build, else bundled at start. */
export function fleetWorkflowCode(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const prebuilt = path.resolve(__dirname, '../../fleet-workflow-bundle.js');
  if (path.extname(__filename) === '.js' && existsSync(prebuilt)) return { workflowBundle: { codePath: prebuilt } };
  return { workflowsPath: fleetWorkflowsPath() };
}
