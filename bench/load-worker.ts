/**
 * The load test's host worker, as its own process so its RSS is its own: vmsnap's real host
 * worker (createHostWorker: both queues, host deps, activities) with a workflow bundle of
 * load-workflows.ts (the real workflows + the RBD-only one). `npm run build` compiles this file
 * with the product, so the load test measures the worker as production runs it (node on dist/,
 * prebuilt bundle). Prints `READY <taskQueue> <snapshotter pid>`; SIGTERM shuts it down.
 * argv: <workflow bundle path> <config JSON>: load-test.ts resolves the lab's config, so this file
 * imports nothing but the product.
 */
import { loadConfig, type ConfigOverrides } from '../src/config';
import { createHostWorker } from '../src/worker/run-worker';
import { jsonLogger } from '../src/worker/logger';

async function main(): Promise<void> {
  const [bundle, configJson] = process.argv.slice(2);
  if (!bundle || !configJson) throw new Error('usage: load-worker <workflow bundle path> <config JSON>');
  const config = loadConfig(JSON.parse(configJson) as ConfigOverrides, {}, undefined);
  const sink = { write: () => true } as unknown as NodeJS.WritableStream;
  const hw = await createHostWorker(config, jsonLogger({ host: config.host }, sink), { workflows: { workflowBundle: { codePath: bundle } } });
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
