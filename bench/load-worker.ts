/**
 * The load test's host worker, as its own process so its RSS is its own: vmsnap's host deps and
 * activities (createHostDeps, createActivities) and a Worker on its own task queue whose bundle
 * is load-workflows.ts (the real workflows + the RBD-only one). Prints `READY <taskQueue>`;
 * SIGTERM shuts it down. Settings come from the lab env; the host id from argv[2].
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { createActivities } from '../activities';
import { hostTaskQueue, loadConfig } from '../src/config';
import { Metrics } from '../src/host/metrics';
import { loadLabEnv } from '../src/lab/env';
import { createHostDeps } from '../src/worker/host-deps';
import { jsonLogger } from '../src/worker/logger';
import { flattenProgressSignal } from '../workflows/progress';

async function main(): Promise<void> {
  const host = process.argv[2] ?? `bench-load-${process.pid}`;
  const env = loadLabEnv();
  const config = loadConfig(
    {
      temporal: { address: env.temporal.address, namespace: env.temporal.namespace },
      libvirt: { uri: env.libvirt!.uri },
      ceph: { conf: env.ceph.conf, id: env.ceph.vmsnapId, keyring: env.ceph.vmsnapKeyring },
      host,
      stateDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-bench-load-')),
      metricsPort: 0,
    },
    {},
    undefined,
  );
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const sink = { write: () => true } as unknown as NodeJS.WritableStream;
  const deps = createHostDeps(config, new Metrics(), jsonLogger({ host }, sink));
  await deps.snapshotter.start();
  const client = new Client({ connection: await Connection.connect({ address: config.temporal.address }), namespace: config.temporal.namespace });
  deps.reportProgress = async (workflowId, progress) => {
    await client.workflow.getHandle(workflowId).signal(flattenProgressSignal, progress as never);
  };
  const connection = await NativeConnection.connect({ address: config.temporal.address });
  const taskQueue = hostTaskQueue(host);
  const worker = await Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue,
    workflowsPath: path.resolve(__dirname, 'load-workflows.ts'),
    activities: createActivities(deps),
    shutdownGraceTime: '30s',
  });
  process.once('SIGTERM', () => worker.shutdown());
  process.once('SIGINT', () => worker.shutdown());
  const running = worker.run();
  process.stdout.write(`READY ${taskQueue} ${deps.snapshotter.pid ?? ''}\n`);
  try {
    await running;
  } finally {
    await deps.close();
    await connection.close();
    await client.connection.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`load worker: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
