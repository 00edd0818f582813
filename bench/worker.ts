/**
 * vmsnap's host worker in this process, against the lab (as test/helpers/harness.ts starts it):
 * real Temporal, libvirtd, guests, Ceph, the restricted `client.vmsnap` key. Own host id, so its
 * own task queue and freeze-guard state dir.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../src/config';
import type { LabEnv } from '../src/lab/env';
import { createHostWorker } from '../src/worker/run-worker';
import { jsonLogger } from '../src/worker/logger';

export interface BenchWorker {
  client: Client;
  taskQueue: string;
  stop(): Promise<void>;
}

export async function startBenchWorker(env: LabEnv): Promise<BenchWorker> {
  const host = `bench-${randomUUID().slice(0, 8)}`;
  const config = loadConfig(
    {
      temporal: { address: env.temporal.address, namespace: env.temporal.namespace },
      libvirt: { uri: env.libvirt!.uri },
      ceph: { conf: env.ceph.conf, id: env.ceph.vmsnapId, keyring: env.ceph.vmsnapKeyring },
      host,
      stateDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-bench-')),
      metricsPort: 0,
    },
    {},
    undefined,
  );
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
