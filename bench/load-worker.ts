/**
 * The load test's host worker, as its own process so its RSS is its own: vmsnap's real host
 * worker (createHostWorker: both queues, host deps, activities) with a workflow bundle of
 * load-workflows.ts (the real workflows + the RBD-only one). `npm run build` compiles this file
 * with the product, so the load test measures the worker as production runs it (node on dist/,
 * prebuilt bundle). Prints `READY <taskQueue> <snapshotter pid>`; SIGTERM shuts it down.
 * argv: <host id> <workflow bundle path>.
 */
import { loadLabEnv } from '../src/lab/env';
import { labWorkerConfig } from '../src/lab/worker-config';
import { createHostWorker } from '../src/worker/run-worker';
import { jsonLogger } from '../src/worker/logger';

async function main(): Promise<void> {
  const host = process.argv[2] ?? `bench-load-${process.pid}`;
  const bundle = process.argv[3];
  if (!bundle) throw new Error('usage: load-worker <host> <workflow bundle path>');
  const config = labWorkerConfig(loadLabEnv(), host, process.env);
  const sink = { write: () => true } as unknown as NodeJS.WritableStream;
  const hw = await createHostWorker(config, jsonLogger({ host }, sink), { workflows: { workflowBundle: { codePath: bundle } } });
  process.once('SIGTERM', () => hw.shutdown());
  process.once('SIGINT', () => hw.shutdown());
  const running = hw.run();
  process.stdout.write(`READY ${hw.taskQueue} ${hw.deps.snapshotter.pid ?? ''}\n`);
  // Where the RSS goes: the V8 heap (workflow state lives there) vs native memory (SDK core, librbd).
  const mem = setInterval(() => {
    const m = process.memoryUsage();
    process.stdout.write(`MEM ${JSON.stringify({ heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external })}\n`);
  }, 1000);
  void running.finally(() => clearInterval(mem));
  await running;
}

main().catch((err: unknown) => {
  process.stderr.write(`load worker: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
