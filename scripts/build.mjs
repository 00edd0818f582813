#!/usr/bin/env node
// `npm run build` (also run by `npm ci` through `prepare`): compiles src/, workflows/ and
// activities/ to dist/, bundles the workflows once into dist/workflow-bundle.js (so a worker
// never loads webpack), and stamps the build with the hash of its sources (bin/source-stamp.js).
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { sourceStamp } = require('../bin/source-stamp.js');

const t0 = Date.now();
const stamp = sourceStamp(root);
const dist = path.join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
const t1 = Date.now();

const { bundleWorkflowCode } = require('@temporalio/worker');
const logger = { log() {}, trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error };
const { code } = await bundleWorkflowCode({
  // From the TypeScript sources, as the SDK does at start: the bundle is 2.7 MiB instead of 4.3
  // (bundling compiled output drags its source maps in), and the worker's RSS follows its size.
  workflowsPath: path.join(root, 'workflows', 'index.ts'),
  // Each snapshot run's end reaches the worker's /metrics through this interceptor's sink; the
  // second puts the run's domain on its workflow log lines.
  workflowInterceptorModules: [path.join(root, 'src', 'model', 'run-end-interceptor.ts'), path.join(root, 'src', 'model', 'run-log-interceptor.ts')],
  logger,
});
// The fleet queue's workflows (workflows/fleet.ts: the routers); runs end on their hosts, so only
// the log interceptor.
const fleet = await bundleWorkflowCode({
  workflowsPath: path.join(root, 'workflows', 'fleet.ts'),
  workflowInterceptorModules: [path.join(root, 'src', 'model', 'run-log-interceptor.ts')],
  logger,
});
mkdirSync(dist, { recursive: true });
writeFileSync(path.join(dist, 'workflow-bundle.js'), code);
writeFileSync(path.join(dist, 'fleet-workflow-bundle.js'), fleet.code);
writeFileSync(path.join(dist, 'build-stamp.json'), JSON.stringify({ stamp, builtAt: new Date().toISOString() }) + '\n');
console.log(`vmsnap: built dist/ (tsc ${((t1 - t0) / 1000).toFixed(1)} s, workflow bundles ${(code.length / 1048576).toFixed(2)} + ${(fleet.code.length / 1048576).toFixed(2)} MiB in ${((Date.now() - t1) / 1000).toFixed(1)} s)`);
