import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import type { RestoreRequest } from '../../src/model/restore-input';
import type { RestoreResult } from '../../src/model/restore-point';
import type { SnapshotResult } from '../../src/model/types';
import { CephView } from '../helpers/ceph-inspect';
import { virsh } from '../helpers/guest';
import { uniqueId } from '../helpers/harness';
import { labVars, need } from '../../support/lab/env';
import { domState, inactiveXml, labGuestsUp } from '../helpers/restore-lab';
import { WorkerProcess } from '../helpers/worker-process';

/*
 * An in-place restore of the 1-disk guest, shut off, with a fault after the disk swap (the domain
 * already points at the restored disk). Whatever happens, the VM ends either fully restored or
 * exactly as before — definition, disks, power state — never half.
 */

const vars = labVars();
const ceph = new CephView(vars);
const guest = need(vars, 'VMSNAP_GUEST_1DISK');
const host = `rfault-${Date.now().toString(36)}`;
let client: Client;
let snap: SnapshotResult;
let originalXml: string;

beforeAll(async () => {
  client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }) });
  const w = new WorkerProcess(vars, host);
  await w.start();
  try {
    snap = await client.workflow.execute('consistentSnapshot', {
      taskQueue: w.taskQueue,
      workflowId: uniqueId('rfault-snap'),
      args: [{ domain: guest, quiesce: 'require' }],
    });
  } finally {
    await w.stop();
  }
  originalXml = await inactiveXml(vars, guest);
}, 600_000);

afterAll(async () => {
  await ceph.removeResultImages(snap);
  await labGuestsUp(vars); // starts the guest again and waits until it is ready
  await client?.connection.close();
}, 600_000);

/** Exactly as before: shut off, same definition, no restored disk, the old disk unmarked. */
async function expectAsBefore(): Promise<void> {
  expect(await domState(vars, guest)).toBe('shut off');
  expect(await inactiveXml(vars, guest)).toBe(originalXml);
  expect((await ceph.images('vms')).filter((i) => i.startsWith(`${guest}-vdb-r`))).toEqual([]);
  expect(Object.keys(await ceph.meta('vms', `${guest}-vdb`)).filter((k) => k.startsWith('vmsnap.restore.'))).toEqual([]);
}

/** Puts a fully restored guest back as it was, so the next cell starts from the same state. */
async function putBack(): Promise<void> {
  await virsh(vars, 'destroy', guest).catch(() => undefined);
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const dir = mkdtempSync('/tmp/vmsnap-rfault-');
  writeFileSync(`${dir}/g.xml`, originalXml);
  await virsh(vars, 'define', `${dir}/g.xml`);
  for (const i of await ceph.images('vms')) if (i.startsWith(`${guest}-vdb-r`)) await ceph.removeImage('vms', i);
  for (const k of Object.keys(await ceph.meta('vms', `${guest}-vdb`))) {
    if (k.startsWith('vmsnap.restore.')) await ceph.rbd('image-meta', 'remove', `vms/${guest}-vdb`, k);
  }
}

const request = (): RestoreRequest => ({ domain: guest, from: snap.workflowId, verify: true, readyTimeoutMs: 300_000 });

describe('restore faults (in place, shut-off guest)', () => {
  it('a failure injected after the disk swap: compensation puts the VM back exactly as it was', async () => {
    await virsh(vars, 'destroy', guest).catch(() => undefined);
    const w = new WorkerProcess(vars, host, { VMSNAP_FAULT_FAIL: '1' });
    await w.start({ points: ['restore:after-swap'] });
    try {
      const err = await client.workflow
        .execute('restoreVm', { taskQueue: w.taskQueue, workflowId: uniqueId('rfault-fail'), args: [request()] })
        .then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect(String((err as WorkflowFailedError).cause?.cause ?? (err as WorkflowFailedError).cause)).toMatch(/fault injected at restore:after-swap/);
      await expectAsBefore();
    } finally {
      await w.stop();
    }
  }, 600_000);

  it('worker SIGKILLed after the disk swap, restarted: fully restored or exactly as before, never half', async () => {
    await virsh(vars, 'destroy', guest).catch(() => undefined);
    const w = new WorkerProcess(vars, host);
    await w.start({ points: ['restore:after-swap'] });
    const id = uniqueId('rfault-kill');
    const handle = await client.workflow.start('restoreVm', { taskQueue: w.taskQueue, workflowId: id, args: [request()] });
    await w.reached('restore:after-swap', 300_000);
    await w.kill();
    const again = new WorkerProcess(vars, host);
    await again.start();
    try {
      const outcome = await handle.result().then((r: RestoreResult) => r, (e: unknown) => e);
      if (outcome instanceof Error) {
        await expectAsBefore();
      } else {
        const r = outcome as RestoreResult;
        expect(await domState(vars, guest)).toBe('running');
        const xml = await inactiveXml(vars, guest);
        expect(xml).toContain(`name='${r.disks[0]!.disk}'`);
        expect(xml.replace(r.disks[0]!.disk, `vms/${guest}-vdb`)).toBe(originalXml);
        expect(r.disks[0]!.sha256).toBe(await ceph.sha256(r.disks[0]!.from));
        expect((await ceph.meta('vms', `${guest}-vdb`))['vmsnap.restore.replaced-by']).toBe(id);
        await putBack();
      }
    } finally {
      await again.stop();
    }
  }, 900_000);
});
