/**
 * A two-host load run (issue 17): runs started by VM name on the fleet queue, spread over both lab
 * hypervisor hosts, with the fleet limits on (maxWindowsPerHost, maxSnapshotsPerCluster held as
 * FIFO queue workflows, workflows/fleet-limit.ts). Baseline measured in the same run: the same VMs snapshotted one at a
 * time (idle). Prints the freeze window p50/p95 idle vs under load, their ratio, how long runs
 * waited for their turn, and runs per minute of the load phase.
 *
 *   npx tsx bench/fleet-load.ts [--rounds 4] [--windows-per-host 1] [--idle 2]
 *
 * Needs the two-host lab (`npm run lab:up`). Snapshot-only runs (`target.clone: false`), so the
 * figure is the fleet's orchestration and limits, not flatten throughput; every kept snapshot is
 * removed at the end.
 */
import { Client, Connection } from '@temporalio/client';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import type { SnapshotResult } from '../src/model/types';
import { createHostWorker } from '../src/worker/run-worker';
import type { HostWorker } from '../src/worker/run-worker';
import { jsonLogger } from '../src/worker/logger';
import { labHypervisor, loadLabEnv, need } from '../support/lab/env';
import { quantile } from './stats';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string, d: number) => (args.includes(`--${name}`) ? Number(args[args.indexOf(`--${name}`) + 1]) || d : d);
  const rounds = opt('rounds', 4);
  const idleRuns = opt('idle', 2);
  const windowsPerHost = opt('windows-per-host', 1);
  const env = loadLabEnv();
  const vars = env.raw;
  if (!env.hosts || !env.guests?.hostB) throw new Error('needs the two-host lab: npm run lab:up');
  const guests = [env.guests.oneDisk, env.guests.threeDisk, env.guests.hostB];
  const quiet = { write: () => true } as unknown as NodeJS.WritableStream;
  const workers: { hw: HostWorker; running: Promise<void> }[] = [];
  for (const which of ['a', 'b'] as const) {
    const hv = labHypervisor(vars, which);
    const config = loadConfig(
      {
        temporal: { address: need(vars, 'TEMPORAL_ADDRESS'), namespace: vars.TEMPORAL_NAMESPACE ?? 'default' },
        libvirt: { uri: hv.uri, statusDir: hv.statusDir },
        ceph: { conf: need(vars, 'CEPH_CONF'), id: vars.CEPH_VMSNAP_ID ?? 'admin', keyring: vars.CEPH_VMSNAP_KEYRING ?? vars.CEPH_KEYRING },
        host: hv.name,
        stateDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-fleetbench-')),
        metricsPort: 0,
        fleetBeatMs: 1000,
        maxWindowsPerHost: windowsPerHost,
      },
      {},
      undefined,
    );
    const hw = await createHostWorker(config, jsonLogger({ host: hv.name }, quiet));
    workers.push({ hw, running: hw.run() });
  }
  const client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }) });
  const results: SnapshotResult[] = [];
  const snap = async (domain: string, tag: string): Promise<SnapshotResult> => {
    const r = (await client.workflow.execute('consistentSnapshot', {
      taskQueue: FLEET_TASK_QUEUE,
      workflowId: `bench-fleet-${tag}-${domain}-${Date.now().toString(36)}`,
      args: [{ domain, quiesce: 'require', target: { clone: false } }],
    })) as SnapshotResult;
    results.push(r);
    return r;
  };
  try {
    await new Promise((r) => setTimeout(r, 3000)); // both hosts in the registry
    for (const g of guests) await snap(g, 'warm');
    const idle: number[] = [];
    for (let i = 0; i < idleRuns; i++) for (const g of guests) idle.push((await snap(g, 'idle')).freezeWindowMs!);
    const t0 = Date.now();
    const loaded: SnapshotResult[] = [];
    for (let i = 0; i < rounds; i++) loaded.push(...(await Promise.all(guests.map((g) => snap(g, `load${i}`)))));
    const minutes = (Date.now() - t0) / 60_000;
    const windows = loaded.map((r) => r.freezeWindowMs!);
    const waited = loaded.map((r) => r.stepsMs.slots ?? 0);
    const byHost = new Map<string, number>();
    for (const r of loaded) byHost.set(r.host, (byHost.get(r.host) ?? 0) + 1);
    const p = (xs: number[], q: number) => Math.round(quantile(xs, q));
    console.log(`fleet-load: ${loaded.length} runs over ${[...byHost].map(([h, n]) => `${h}:${n}`).join(' ')}, ${guests.length} at a time, maxWindowsPerHost=${windowsPerHost}`);
    console.log(`  freeze window idle p50 ${p(idle, 0.5)} ms p95 ${p(idle, 0.95)} ms | under load p50 ${p(windows, 0.5)} ms p95 ${p(windows, 0.95)} ms`);
    console.log(`  turn wait p50 ${p(waited, 0.5)} ms max ${Math.max(...waited)} ms; ${(loaded.length / minutes).toFixed(1)} runs/min`);
    console.log(`fleet-load windows load/idle p50 = ${(quantile(windows, 0.5) / quantile(idle, 0.5)).toFixed(2)}`);
  } finally {
    for (const r of results) {
      for (const d of r.disks) await run('rbd', ['-c', need(vars, 'CEPH_CONF'), '--id', 'admin', '--keyring', need(vars, 'CEPH_KEYRING'), 'snap', 'rm', d.snapshot]).catch(() => undefined);
    }
    for (const w of workers) w.hw.shutdown();
    await Promise.all(workers.map((w) => w.running));
    await client.connection.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
