import { existsSync } from 'node:fs';
import path from 'node:path';
import type { WorkerOptions } from '@temporalio/worker';

/** A module of ours by its path from here without extension: its source under tsx/vitest, its compiled .js in dist/. */
function ownModule(relative: string): string {
  const ts = path.resolve(__dirname, `${relative}.ts`);
  return existsSync(ts) ? ts : path.resolve(__dirname, `${relative}.js`);
}

/** Entry of a host queue's workflow bundle, whether we run from sources (tsx, vitest) or compiled output. */
export function workflowsPath(): string {
  return ownModule('../../workflows/index');
}

/**
 * Entry of the fleet queue's bundle (workflows/fleet.ts): the same workflow types, with
 * consistentSnapshot and restoreVm as the routers that find a VM's host.
 */
export function fleetWorkflowsPath(): string {
  return ownModule('../../workflows/fleet');
}

/**
 * The workflow interceptor module that tells the worker each snapshot run's end (a sink), bundled
 * beside the workflows: by the SDK at start from sources, by scripts/build.mjs into the prebuilt bundle.
 */
export function runEndInterceptorPath(): string {
  return ownModule('../model/run-end-interceptor');
}

/** The workflow interceptor module that puts the run's domain on its workflow log lines; bundled as the run-end one is. */
export function runLogInterceptorPath(): string {
  return ownModule('../model/run-log-interceptor');
}

/**
 * The compiled build ships the bundles in dist/ (`workflow-bundle.js`, `fleet-workflow-bundle.js`),
 * bundled by `npm run build` from the same sources (bin/vmsnap.js runs dist/ only when its stamp
 * matches). Loading them keeps webpack out of the worker process: ~140 MiB less RSS. From sources
 * the SDK bundles at start, as before.
 */
function prebuiltOrSource(bundle: string, entry: () => string): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const prebuilt = path.resolve(__dirname, '../..', bundle);
  if (path.extname(__filename) === '.js' && existsSync(prebuilt)) return { workflowBundle: { codePath: prebuilt } };
  return { workflowsPath: entry() };
}

/** A host queue's workflow code. */
export function workflowCode(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  return prebuiltOrSource('workflow-bundle.js', workflowsPath);
}

/** The fleet queue's workflow code. */
export function fleetWorkflowCode(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  return prebuiltOrSource('fleet-workflow-bundle.js', fleetWorkflowsPath);
}
