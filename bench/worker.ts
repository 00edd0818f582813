/**
 * vmsnap's host worker in this process, against the lab (as test/helpers/harness.ts starts it):
 * real Temporal, libvirtd, guests, Ceph, the restricted `client.vmsnap` key. Own host id, so its
 * own task queue and freeze-guard state dir.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { LabEnv } from '../support/lab/env';
import { labWorkerConfig } from '../support/lab/worker-config';
import { createHostWorker } from '../src/worker/run-worker';
import { jsonLogger } from '../src/worker/logger';

export interface BenchWorker {
  client: Client;
  taskQueue: string;
  stop(): Promise<void>;
}

/** `settings`: worker settings as the environment would give them (e.g. VMSNAP_PRE_FLUSH_TIMEOUT_MS). */
export async function startBenchWorker(env: LabEnv, settings: NodeJS.ProcessEnv = {}): Promise<BenchWorker> {
  const host = `bench-${randomUUID().slice(0, 8)}`;
  const config = labWorkerConfig(env, host, settings);
  const sink = { write: () => true } as unknown as NodeJS.WritableStream;
  const hw = await createHostWorker(config, jsonLogger({ host }, sink));
  const running = hw.run();
  const client = new Client({ connection: await Connection.connect({ address: config.temporal.address }), namespace: config.temporal.namespace });
  return {
    client,
    taskQueue: hw.taskQueue,
    async stop() {
      hw.shutdown();
      await running;
      await client.connection.close();
    },
  };
}
