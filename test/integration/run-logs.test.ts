import { ApplicationFailure } from '@temporalio/common';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import { CephView } from '../helpers/ceph-inspect';
import { ensureThawed } from '../helpers/guest';
import { uniqueId } from '../helpers/harness';
import { WorkerProcess } from '../helpers/worker-process';
import { labVars, need } from '../../support/lab/env';

/*
 * What an on-call engineer filters a worker's log by, on real runs: every line about a run names
 * its workflow id and run id (and its domain where the line has one), whoever wrote it — vmsnap's
 * activities, the SDK's activity and workflow loggers; and VMSNAP_LOG_LEVEL drops what it should,
 * the SDK's lines included. Snapshot-only runs (no clone): what they log is the freeze window's.
 */
const vars = labVars();
// Three disks: three snapshots in one window; and the guest the other suites use least.
const guest = need(vars, 'VMSNAP_GUEST_3DISK');
const ceph = new CephView(vars);
let client: Client;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }), namespace: vars.TEMPORAL_NAMESPACE ?? 'default' });
});

afterAll(async () => {
  await ensureThawed(vars, guest);
  for (const w of workers) await w.stop();
  await client?.connection.close();
});

type Line = Record<string, unknown> & { level: string; msg: string };

/** A worker at `level`, started once it wrote `readyText`. */
async function workerAt(level: string, readyText: string): Promise<WorkerProcess> {
  const w = new WorkerProcess(vars, `logs-${uniqueId('h').slice(2)}`, { VMSNAP_LOG_LEVEL: level });
  workers.push(w);
  await w.start({}, readyText);
  return w;
}

/**
 * One snapshot-only run on `w`'s queue; the RBD snapshots and their metadata are removed after. The
 * lab is shared: a run refused DomainBusy (another test's run of the guest) is started again.
 */
async function snapshotOn(w: WorkerProcess): Promise<{ workflowId: string; runId: string }> {
  let workflowId: string, runId: string, result: SnapshotResult | undefined;
  for (const until = Date.now() + 150_000; ; await new Promise((r) => setTimeout(r, 2000))) {
    workflowId = uniqueId('logs');
    const handle = await client.workflow.start('consistentSnapshot', { taskQueue: w.taskQueue, workflowId, args: [{ domain: guest, quiesce: 'require', target: { clone: false } }] });
    runId = handle.firstExecutionRunId;
    result = await handle.result().catch((err: unknown) => {
      if (Date.now() < until && err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure && err.cause.type === 'DomainBusy') return undefined;
      throw err;
    });
    if (result) break;
  }
  expect(result.quiesced).toBe(true);
  for (const d of result.disks) {
    const [pool, image] = d.source.split('/') as [string, string];
    const snap = d.snapshot.split('@')[1]!;
    await ceph.rbd('snap', 'rm', `${pool}/${image}@${snap}`);
    for (const key of [`vmsnap.done.${snap}`, `vmsnap.snap-owner.${snap}`]) await ceph.rbd('image-meta', 'remove', `${pool}/${image}`, key).catch(() => undefined);
  }
  return { workflowId, runId };
}

/** The worker's lines so far, each parsed; a line that is not one JSON object fails the test. */
function linesOf(w: WorkerProcess): Line[] {
  return w.logs
    .join('')
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('---'))
    .map((l) => {
      try {
        return JSON.parse(l) as Line;
      } catch {
        throw new Error(`worker ${w.host} wrote a line that is not JSON: ${l}`);
      }
    });
}

describe('run logs', () => {
  let atDebug: WorkerProcess, atWarn: WorkerProcess;

  beforeAll(async () => {
    // One after the other: each bundles its workflows at start, the longest part of this file, and
    // two at once on a loaded 2-core machine took one past WorkerProcess's 60 s start limit.
    atDebug = await workerAt('debug', '"worker started"');
    // At warn the worker's first line is the SDK's warning that its bulk queue has no workflows.
    atWarn = await workerAt('warn', '"level":"warn"');
  }, 150_000);

  it('at debug, every line about a run carries its workflow id and run id, and its domain where it has one', async () => {
    const run = await snapshotOn(atDebug);
    // The SDK writes a workflow's last lines as its task completes, after the client saw the result.
    await new Promise((r) => setTimeout(r, 1000));
    const about = linesOf(atDebug).filter((l) => JSON.stringify(l).includes(run.workflowId) || JSON.stringify(l).includes(run.runId));
    const wrong = about.filter((l) => l.workflowId !== run.workflowId || l.runId !== run.runId);
    expect(wrong, JSON.stringify(wrong, null, 1)).toEqual([]);
    // Each writer is there: vmsnap's activity lines, the SDK's activity and workflow lines.
    expect(about.find((l) => l.msg === 'guest thawed' && !l.sdk)).toMatchObject({ domain: guest, activityType: 'thawGuest' });
    expect(about.find((l) => l.sdk && l.msg === 'Activity completed' && l.activityType === 'freezeGuest')).toMatchObject({ domain: guest });
    expect(about.find((l) => l.sdk && l.msg === 'Workflow completed')).toMatchObject({ domain: guest });
    // A line about this run that names a domain names the run's.
    expect(about.filter((l) => 'domain' in l && l.domain !== guest)).toEqual([]);
  });

  it('at warn, no info or debug line is written, the SDK’s included', async () => {
    await snapshotOn(atWarn);
    await new Promise((r) => setTimeout(r, 1000));
    const lines = linesOf(atWarn);
    expect(lines.filter((l) => l.level !== 'warn' && l.level !== 'error')).toEqual([]);
    // Not an empty test: the same kind of worker and run writes info lines of every source at debug.
    const info = linesOf(atDebug).filter((l) => l.level === 'info');
    expect(info.find((l) => l.msg === 'guest thawed' && !l.sdk)).toBeDefined();
    expect(info.find((l) => l.sdkComponent === 'worker')).toBeDefined();
    expect(info.find((l) => l.sdkComponent === 'core')).toBeDefined();
    expect(linesOf(atDebug).find((l) => l.level === 'debug')).toBeDefined();
  });
});
