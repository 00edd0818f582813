import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RestoreResult } from '../../src/model/restore-point';
import type { SnapshotResult } from '../../src/model/types';
import { OrphanReaper } from '../../src/worker/orphan-reaper';
import { need } from '../../support/lab/env';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { ensureThawed, virsh } from '../helpers/guest';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import {
  agentAnswers, domState, guestIgnoresShutdown, inactiveXml, labGuestRecreate, probeLogOf, teachGuestToPowerOff,
} from '../helpers/restore-lab';
import { WorkerProcess } from '../helpers/worker-process';

/*
 * The 1-disk guest, running: `--stop` when the guest ignores the request (ShutdownTimeout, left
 * running and untouched) and when it powers off (restored in place, running again); the reaper's
 * retention of the disk that restore replaced; and the reaper removing the disk of a restore that
 * was terminated — only once no defined domain uses it.
 */

let h: Harness;
let ceph: CephView;
let env: NodeJS.ProcessEnv;
let g1: string;
let older: SnapshotResult;

beforeAll(async () => {
  // The harness worker's own reaper stays out of the way: this file runs sweeps itself.
  h = await startHarness({ config: { reapIntervalMs: 24 * 3600_000 } });
  ceph = new CephView(h.vars);
  env = cliEnv(h.vars, { VMSNAP_HOST: h.config.host });
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
  older = await h.client.workflow.execute('consistentSnapshot', {
    taskQueue: h.hw.taskQueue,
    workflowId: uniqueId('snap-g1'),
    args: [{ domain: g1, quiesce: 'require' }],
  });
}, 600_000);

afterAll(async () => {
  if (older) await ceph.removeResultImages(older);
  if (g1) await ensureThawed(h.vars, g1);
  await h?.stop();
}, 300_000);

const restoreKeys = async (image: string) => Object.keys(await ceph.meta('vms', image)).filter((k) => k.startsWith('vmsnap.restore.'));
const restoredDisks = async () => (await ceph.images('vms')).filter((i) => i.startsWith(`${g1}-vdb-r`));
const reaper = (keepReplacedMs: number, host = h.config.host) =>
  new OrphanReaper({ ...h.hw.deps, host }, h.client, 'images', h.hw.deps.log, 3600_000, 3600_000, keepReplacedMs);

describe('in-place restore of a running VM (--stop)', () => {
  it('a guest that ignores the shutdown request: ShutdownTimeout, left running and untouched', async () => {
    expect(await domState(h.vars, g1)).toBe('running');
    await guestIgnoresShutdown(h.vars, g1);
    const before = await inactiveXml(h.vars, g1);
    const id = uniqueId('restore-stop-timeout');
    const r = await vmsnapCli(['restore', g1, '--from', older.workflowId, '--stop', '--shutdown-timeout-ms', '3000', '--wait', '--json', '--workflow-id', id], env, 300_000);
    expect(r.code, r.stderr + r.stdout).toBe(1);
    expect(json<{ type: string; message: string }>(r)).toMatchObject({ type: 'ShutdownTimeout', message: expect.stringMatching(/left running/) });
    expect(await domState(h.vars, g1)).toBe('running');
    expect(await agentAnswers(h.vars, g1)).toBe(true);
    expect(await inactiveXml(h.vars, g1)).toBe(before);
    expect(await restoredDisks()).toEqual([]);
    expect(await restoreKeys(`${g1}-vdb`)).toEqual([]);
  }, 600_000);

  it('a guest that powers off: restored in place, running again on the snapshot’s contents; the replaced disk is kept, then retention removes it', async () => {
    const before = await inactiveXml(h.vars, g1);
    const id = uniqueId('restore-stop');
    try {
      await teachGuestToPowerOff(h.vars, g1);
      const r = await vmsnapCli(['restore', g1, '--from', older.workflowId, '--stop', '--verify', '--wait', '--json', '--workflow-id', id], env, 600_000);
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const result = json<RestoreResult>(r);
      const disk = result.disks[0]!;
      expect(disk).toMatchObject({ target: 'vdb', previous: `vms/${g1}-vdb`, from: `${older.disks[0]!.image}@snap` });
      expect(result.stepsMs.stop).toBeGreaterThan(0);
      // --verify: the restored disk was the snapshot's image, byte for byte, before the VM started on it.
      expect(disk.sha256).toBe(await ceph.sha256(disk.from));
      expect(await domState(h.vars, g1)).toBe('running');
      expect(await agentAnswers(h.vars, g1)).toBe(true);
      const now = await inactiveXml(h.vars, g1);
      expect(now.replace(disk.disk, `vms/${g1}-vdb`)).toBe(before);
      expect((await ceph.meta('vms', `${g1}-vdb`))['vmsnap.restore.replaced-by']).toBe(id);

      // Retention: younger than keepReplacedMs, kept; with a tiny age, removed — the disk in use never.
      expect((await reaper(3600_000).sweep()).restore.removed).toEqual([]);
      expect(await ceph.images('vms')).toContain(`${g1}-vdb`);
      await new Promise((res) => setTimeout(res, 1500));
      const swept = await reaper(1000).sweep();
      expect(swept.restore.removed).toHaveLength(1);
      expect(swept.restore.removed[0]).toMatch(new RegExp(`^vms/${g1}-vdb \\(replaced by ${id} at `));
      const images = await ceph.images('vms');
      expect(images).not.toContain(`${g1}-vdb`);
      expect(images).toContain(disk.disk.split('/')[1]);

      // Its probe log up to the snapshot point is the snapshot's.
      await virsh(h.vars, 'destroy', g1);
      const atOlder = await probeLogOf(ceph, disk.from);
      expect((await probeLogOf(ceph, disk.disk)).slice(0, atOlder.length)).toEqual(atOlder);
    } finally {
      // Put g1 back as lab:up makes it (a fresh disk under its usual name), then drop the restored disk.
      await virsh(h.vars, 'destroy', g1).catch(() => undefined);
      await labGuestRecreate(h.vars, g1);
      for (const img of await restoredDisks()) await ceph.removeImage('vms', img);
    }
    expect(await agentAnswers(h.vars, g1)).toBe(true);
  }, 1_200_000);
});

describe('the reaper and a terminated restore', () => {
  it('removes the disk a terminated restore made, but not while a defined domain uses it', async () => {
    const host = `rreap-${Date.now().toString(36)}`;
    // Its own reaper must not race this test's sweeps.
    const w = new WorkerProcess(h.vars, host, { VMSNAP_REAP_INTERVAL_MS: String(24 * 3600_000) });
    const name = uniqueId('vmsnap-rt');
    const clone = `${name}-vdb`;
    const holder = uniqueId('vmsnap-hold');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-hold-'));
    await w.start({ points: ['restore:after-clone'] });
    try {
      const handle = await h.client.workflow.start('restoreVm', {
        taskQueue: w.taskQueue,
        workflowId: uniqueId('restore-terminated'),
        args: [{ domain: g1, from: older.workflowId, as: name }],
      });
      await w.reached('restore:after-clone', 300_000);
      await w.kill();
      await handle.terminate('test: no compensation runs');
      expect((await handle.describe()).status.name).toBe('TERMINATED');
      expect(await ceph.images('vms')).toContain(clone);
      expect((await ceph.meta('vms', clone))['vmsnap.restore.workflow-id']).toBe(handle.workflowId);
      // Made by the worker of host `host`: only that host's reaper judges it (another host's never does).
      expect((await ceph.meta('vms', clone))['vmsnap.restore.host']).toBe(host);
      expect((await reaper(3600_000).sweep()).restore.removed).toEqual([]);

      // A shut-off domain defined on this host that uses the disk: the reaper leaves it.
      writeFileSync(
        path.join(dir, 'hold.xml'),
        `<domain type='qemu'><name>${holder}</name><memory unit='MiB'>64</memory><os><type arch='x86_64' machine='pc'>hvm</type></os>` +
          `<devices><disk type='network' device='disk'><source protocol='rbd' name='vms/${clone}'/><target dev='vdb' bus='virtio'/></disk></devices></domain>`,
      );
      await virsh(h.vars, 'define', path.join(dir, 'hold.xml'));
      expect((await reaper(3600_000, host).sweep()).restore.removed).toEqual([]);
      expect(await ceph.images('vms')).toContain(clone);

      await virsh(h.vars, 'undefine', holder);
      const swept = await reaper(3600_000, host).sweep();
      expect(swept.restore.removed).toEqual([`vms/${clone} (restore ${handle.workflowId} TERMINATED)`]);
      expect(await ceph.images('vms')).not.toContain(clone);
      // The source VM was never touched.
      expect(await domState(h.vars, g1)).toBe('running');
    } finally {
      await w.stop();
      await virsh(h.vars, 'undefine', holder).catch(() => undefined);
      await ceph.removeImage('vms', clone).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
