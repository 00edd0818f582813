import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RestoreResult } from '../../src/model/restore-point';
import type { ImageSet } from '../../src/model/restore-point';
import type { SnapshotResult } from '../../src/model/types';
import { snapshotFsState } from '../../support/lab/probe';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { ensureThawed } from '../helpers/guest';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { need } from '../../support/lab/env';
import { agentAnswers, domState, inactiveXml, labGuestRecreate, probeLogOf, removeVm } from '../helpers/restore-lab';
import { virsh } from '../helpers/guest';
import { readTicks } from '../../support/lab/probe';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cephTestEnv } from '../../support/ceph';
import { deadLockOwner } from '../helpers/lock-holder';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-restore-'));

let h: Harness;
let ceph: CephView;
let env: NodeJS.ProcessEnv;
let g1: string;
let g3: string;
const made: SnapshotResult[] = [];

beforeAll(async () => {
  h = await startHarness();
  ceph = new CephView(h.vars);
  env = cliEnv(h.vars, { VMSNAP_HOST: h.config.host });
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
  g3 = need(h.vars, 'VMSNAP_GUEST_3DISK');
}, 600_000);

afterAll(async () => {
  for (const r of made) await ceph.removeResultImages(r);
  for (const g of [g1, g3]) if (g) await ensureThawed(h.vars, g);
  await h?.stop();
}, 300_000);

async function snapshot(domain: string): Promise<SnapshotResult> {
  const r: SnapshotResult = await h.client.workflow.execute('consistentSnapshot', {
    taskQueue: h.hw.taskQueue,
    workflowId: uniqueId(`snap-${domain}`),
    args: [{ domain, quiesce: 'require' }],
  });
  made.push(r);
  return r;
}

const fs = (spec: string) => {
  const [pool, rest] = spec.split('/') as [string, string];
  const [image, snap] = rest.split('@') as [string, string];
  return { cephConf: need(h.vars, 'CEPH_CONF'), id: 'admin', keyring: need(h.vars, 'CEPH_KEYRING'), pool, image, snap };
};

describe('restore on the lab', () => {
  it('--as: a new VM from a 3-disk snapshot taken under the probe’s writes boots, answers, and each disk is the snapshot', async () => {
    const snap = await snapshot(g3);
    expect(snap.quiesced).toBe(true);

    const listed = await vmsnapCli(['list', g3, '--json'], env);
    expect(listed.code, listed.stderr).toBe(0);
    const set = json<{ sets: ImageSet[] }>(listed).sets.find((s) => s.workflowId === snap.workflowId)!;
    expect(set).toMatchObject({ quiesced: true, restorable: true, complete: true });
    expect(set.disks.map((d) => d.target)).toEqual(['vdb', 'vdc', 'vdd']);

    const name = uniqueId('vmsnap-r3');
    const disks = ['vdb', 'vdc', 'vdd'].map((t) => `vms/${name}-${t}`);
    try {
      const r = await vmsnapCli(['restore', g3, '--from', snap.workflowId, '--as', name, '--verify', '--wait', '--json', '--workflow-id', uniqueId('restore-as')], env, 600_000);
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const result = json<RestoreResult>(r);
      expect(result.mode).toBe('as');
      expect(result.disks.map((d) => d.disk)).toEqual(disks);
      expect(await domState(h.vars, name)).toBe('running');
      expect(await agentAnswers(h.vars, name)).toBe(true);
      // The original keeps running, untouched.
      expect(await domState(h.vars, g3)).toBe('running');
      expect(await inactiveXml(h.vars, g3)).not.toContain(name);

      for (const d of result.disks) {
        const from = d.from; // images/<image>@snap
        expect(d.sha256).toBe(await ceph.sha256(from));
        expect(await snapshotFsState(fs(from))).toBe('clean');
      }
      // Stop the new VM: its disks now hold the snapshot's probe log plus what the new VM appended.
      await virsh(h.vars, 'destroy', name);
      for (const d of result.disks) {
        const atSnapshot = await probeLogOf(ceph, d.from);
        const restored = await probeLogOf(ceph, d.disk);
        expect(atSnapshot.length).toBeGreaterThan(0);
        // Up to the snapshot point the restored log is exactly the snapshot's; the next entry is
        // the restored VM's own first write (sequence continues, written after the restore began).
        expect(restored.slice(0, atSnapshot.length)).toEqual(atSnapshot);
        const next = restored[atSnapshot.length];
        if (next) expect(next.seq).toBe(atSnapshot.at(-1)!.seq + 1);
        if (next) expect(Number(next.t) * 1000).toBeGreaterThan(Date.parse(result.from.takenAt));
      }
      // The source VM wrote past the snapshot point meanwhile. Seen through its probe's console
      // ticks: its disk read through an unfrozen snapshot shows only what ext4 has checkpointed.
      const vdbAtSnap = await probeLogOf(ceph, result.disks[0]!.from);
      const live = (await readTicks(g3, Date.parse(result.from.takenAt))).filter((t) => t.disk === 'vdb');
      expect(Math.max(...live.map((t) => t.seq))).toBeGreaterThan(vdbAtSnap.at(-1)!.seq);
    } finally {
      await removeVm(h.vars, ceph, name, disks);
    }
  }, 900_000);

  it('bad input is refused before anything changes (exit 2, typed)', async () => {
    const vmsBefore = await ceph.images('vms');
    const cases: [string[], RegExp][] = [
      [['restore', g1, '--from', 'no-such-run', '--as', uniqueId('x')], /RestorePointNotFound/],
      [['restore', 'no-such-vm', '--as', uniqueId('x')], /RestorePointNotFound/],
      [['restore', g3, '--as', g1], /NameConflict/],
      [['restore', g3], /DomainRunning/],
      [['restore', g3, '--as', 'bad/name'], /invalid restore request/],
    ];
    for (const [argv, why] of cases) {
      const r = await vmsnapCli([...argv, '--wait', '--workflow-id', uniqueId('bad')], env, 300_000);
      expect(r.code, `${argv.join(' ')}: ${r.stdout}${r.stderr}`).toBe(2);
      expect(r.stdout + r.stderr).toMatch(why);
    }
    expect(await ceph.images('vms')).toEqual(vmsBefore);
    expect(await domState(h.vars, g3)).toBe('running');
  }, 900_000);

  it('in place: a shut-off 1-disk VM gets an older snapshot back, the old disk is kept until --confirm', async () => {
    const older = await snapshot(g1);
    await new Promise((r) => setTimeout(r, 2000));
    await snapshot(g1);
    const before = await inactiveXml(h.vars, g1);
    const id = uniqueId('restore-inplace');
    try {
      await virsh(h.vars, 'destroy', g1);
      const r = await vmsnapCli(['restore', g1, '--from', older.workflowId, '--verify', '--wait', '--json', '--workflow-id', id], env, 600_000);
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const result = json<RestoreResult>(r);
      const [disk] = result.disks;
      expect(disk).toMatchObject({ target: 'vdb', previous: `vms/${g1}-vdb`, from: `${older.disks[0]!.image}@snap` });
      expect(disk!.sha256).toBe(await ceph.sha256(disk!.from));
      expect(await domState(h.vars, g1)).toBe('running');
      expect(await agentAnswers(h.vars, g1)).toBe(true);
      const now = await inactiveXml(h.vars, g1);
      expect(now).toContain(`name='${disk!.disk}'`);
      // Only the disk's source changed in the definition.
      expect(now.replace(disk!.disk, `vms/${g1}-vdb`)).toBe(before);
      // Kept, and marked.
      expect(await ceph.images('vms')).toContain(`${g1}-vdb`);
      expect((await ceph.meta('vms', `${g1}-vdb`))['vmsnap.restore.replaced-by']).toBe(id);

      // A client that opened the replaced disk and died holding its lock: --confirm keeps it and
      // leaves the lock (librbd's own removal used to break it and remove the disk).
      const dead = await deadLockOwner(tmp, cephTestEnv(), await h.hw.deps.ioctx('vms'), `${g1}-vdb`, (...x) => ceph.rbd(...x));
      const held = await vmsnapCli(['restore', g1, '--confirm', id, '--json'], env);
      expect(held.code, held.stderr + held.stdout).toBe(1);
      expect(json<{ kept: unknown[] }>(held).kept).toEqual([{ disk: `vms/${g1}-vdb`, reason: expect.stringContaining(`locked by ${dead[0]!.locker}`) }]);
      expect(await ceph.images('vms')).toContain(`${g1}-vdb`);
      expect(JSON.parse(await ceph.rbd('lock', 'ls', '--format', 'json', `vms/${g1}-vdb`))).toEqual(dead);
      // The operator breaks the dead client's lock; then --confirm removes the disk.
      await ceph.rbd('lock', 'rm', `vms/${g1}-vdb`, dead[0]!.id, dead[0]!.locker);

      const c = await vmsnapCli(['restore', g1, '--confirm', id, '--json'], env);
      expect(c.code, c.stderr + c.stdout).toBe(0);
      expect(json<{ removed: string[] }>(c).removed).toEqual([`vms/${g1}-vdb`]);
      expect(await ceph.images('vms')).not.toContain(`${g1}-vdb`);

      await virsh(h.vars, 'destroy', g1);
      const restored = await probeLogOf(ceph, disk!.disk);
      const atOlder = await probeLogOf(ceph, disk!.from);
      expect(restored.slice(0, atOlder.length)).toEqual(atOlder);
    } finally {
      // Put g1 back as lab:up makes it (a fresh disk under its usual name), then drop the restored disk.
      await virsh(h.vars, 'destroy', g1).catch(() => undefined);
      await labGuestRecreate(h.vars, g1);
      for (const img of await ceph.images('vms')) if (img.startsWith(`${g1}-vdb-r`)) await ceph.removeImage('vms', img);
    }
    expect(await agentAnswers(h.vars, g1)).toBe(true);
  }, 1_200_000);
});
