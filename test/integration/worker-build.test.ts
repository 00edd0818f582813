import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import { CephView } from '../helpers/ceph-inspect';
import { uniqueId } from '../helpers/harness';
import { labVars, need } from '../../support/lab/env';
import { WorkerProcess } from '../helpers/worker-process';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- plain JS, shared with bin/vmsnap.js
const { distIsFresh } = require('../../bin/source-stamp.js') as { distIsFresh(root: string): boolean };
const ROOT = path.resolve(__dirname, '../..');

/*
 * The worker as it ships: `npm ci` builds dist/ and the workflow bundle, and `vmsnap worker`
 * (bin/vmsnap.js) runs that build. Its clone/flatten/finalize go to the host's bulk queue.
 */
const vars = labVars();
let w: WorkerProcess;
let client: Client;

beforeAll(async () => {
  // A checkout edited since its last build runs from sources; build so this tests the artifact.
  if (!distIsFresh(ROOT)) expect(spawnSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs')], { cwd: ROOT, stdio: 'inherit' }).status).toBe(0);
  w = new WorkerProcess(vars, `build-${uniqueId('h').slice(2)}`);
  await w.start();
  client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }), namespace: vars.TEMPORAL_NAMESPACE ?? 'default' });
}, 120_000);

afterAll(async () => {
  await w?.stop();
  await client?.connection.close();
});

describe('the shipped worker', () => {
  it('runs compiled code with the prebuilt workflow bundle, and copies on its bulk queue', async () => {
    const started = w.logs.join('').split('\n').find((l) => l.includes('"worker started"'));
    expect(started).toContain('"workflowCode":"prebuilt bundle"');
    expect(started).toContain('"bulkSlots":2');

    const id = uniqueId('build');
    const result: SnapshotResult = await client.workflow.execute('consistentSnapshot', {
      taskQueue: w.taskQueue,
      workflowId: id,
      args: [{ domain: need(vars, 'VMSNAP_GUEST_1DISK'), quiesce: 'require' }],
    });
    expect(result.quiesced).toBe(true);
    const queues = new Map<string, string>();
    for (const e of (await client.workflow.getHandle(id).fetchHistory()).events ?? []) {
      const a = e.activityTaskScheduledEventAttributes;
      if (a) queues.set(a.activityType!.name!, a.taskQueue!.name!);
    }
    for (const bulk of ['cloneDisk', 'flattenDisk', 'finalizeDisk']) expect(queues.get(bulk)).toBe(`${w.taskQueue}-bulk`);
    // The checks are local activities in this worker (vmsnap-fewer-round-trips): no task on any queue.
    expect(queues.has('inspectDomain')).toBe(false);
    const ceph = new CephView(vars);
    await ceph.removeResultImages(result);
  });
});
