import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESTORE_META } from '../../src/model/restore-point';
import { restoreScopeMetadata } from '../../src/model/restore-leftovers';
import { OrphanReaper } from '../../src/worker/orphan-reaper';
import { cephTestEnv } from '../../support/ceph';
import { CephView } from '../helpers/ceph-inspect';
import { virsh } from '../helpers/guest';
import { need } from '../../support/lab/env';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { blocklist, deadLockOwner } from '../helpers/lock-holder';

/*
 * Issue 25 #5: every host reaps the shared VM pool, but each sees only its own domains. Two
 * hosts' reapers (hv-a, hv-b) over one pool:
 *  - a kept disk of a terminated restore that hv-a made, used by a shut-off VM defined on hv-a:
 *    neither reaper removes it (hv-b's used to: nothing on hv-b uses it); hv-a's removes it once
 *    that VM is undefined;
 *  - the same disk once its VM moved to hv-b and was shut off there: hv-a's reaper asks the fleet
 *    and keeps it, naming the domain and host (it used to see no domain of its own using it and
 *    remove it); removed once hv-b undefines the VM;
 *  - a leftover of hv-a's whose exclusive lock is still held by a dead client (SIGKILLed, its
 *    watch expired): kept, the lock not broken, nobody blocklisted (librbd's removal used to break
 *    it and remove the disk).
 */

let a: Harness;
let b: Harness;
let ceph: CephView;
const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-reapfleet-'));

beforeAll(async () => {
  a = await startHarness({ labHost: 'a', config: { reapIntervalMs: 24 * 3600_000 } });
  b = await startHarness({ labHost: 'b', config: { reapIntervalMs: 24 * 3600_000 } });
  ceph = new CephView(a.vars);
}, 300_000);

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

const reaperOf = (h: Harness) => new OrphanReaper(h.hw.deps, h.client, 'images', h.hw.deps.log, 3600_000, 3600_000, 3600_000);

/** A restore workflow that ended TERMINATED (started on a queue nobody polls). */
async function terminatedRestore(): Promise<string> {
  const handle = await a.client.workflow.start('restoreVm', {
    taskQueue: uniqueId('nobody-polls'),
    workflowId: uniqueId('restore-kept'),
    args: [{ domain: 'none', from: 'latest', as: 'none' }],
  });
  await handle.terminate('test: a restore that never finished');
  return handle.workflowId;
}

/** A disk in `vms` marked as hv-a's restore's, as cloneRestoreDisk marks it. */
async function leftoverOfA(name: string, workflowId: string): Promise<void> {
  await ceph.rbd('create', '--size', '16M', `vms/${name}`);
  const meta = { [RESTORE_META.workflowId]: workflowId, ...restoreScopeMetadata(a.hw.deps.scope, a.config.host) };
  for (const [k, v] of Object.entries(meta)) await ceph.rbd('image-meta', 'set', `vms/${name}`, k, v);
}

describe('two hosts reap one pool', () => {
  it('a kept disk of hv-a (its VM shut off there) is never removed by hv-b, nor by hv-a while defined', async () => {
    const wf = await terminatedRestore();
    const disk = uniqueId('vmsnap-kept');
    const vm = uniqueId('vmsnap-keeper');
    try {
      await leftoverOfA(disk, wf);
      writeFileSync(
        path.join(dir, 'keeper.xml'),
        `<domain type='qemu'><name>${vm}</name><memory unit='MiB'>64</memory><os><type arch='x86_64' machine='pc'>hvm</type></os>` +
          `<devices><disk type='network' device='disk'><source protocol='rbd' name='vms/${disk}'/><target dev='vdb' bus='virtio'/></disk></devices></domain>`,
      );
      await virsh(a.vars, 'define', path.join(dir, 'keeper.xml'));
      expect(await virsh(a.vars, 'domstate', vm)).toBe('shut off');

      for (let pass = 0; pass < 2; pass++) {
        for (const h of [b, a]) {
          const r = await reaperOf(h).sweep();
          expect(r.restore.removed.filter((x) => x.includes(disk))).toEqual([]);
          expect(await ceph.images('vms')).toContain(disk);
        }
      }

      // The operator lets it go: hv-a, its maker, reaps it; hv-b never had a say.
      await virsh(a.vars, 'undefine', vm);
      expect((await reaperOf(b).sweep()).restore.removed.filter((x) => x.includes(disk))).toEqual([]);
      expect(await ceph.images('vms')).toContain(disk);
      expect((await reaperOf(a).sweep()).restore.removed).toContain(`vms/${disk} (restore ${wf} TERMINATED)`);
      expect(await ceph.images('vms')).not.toContain(disk);
    } finally {
      await virsh(a.vars, 'undefine', vm).catch(() => undefined);
      await ceph.removeImage('vms', disk).catch(() => undefined);
    }
  }, 300_000);

  it('a kept disk of hv-a whose VM moved to hv-b and is shut off there is kept by hv-a: "in use" is fleet-wide', async () => {
    const wf = await terminatedRestore();
    const disk = uniqueId('vmsnap-moved');
    const vm = uniqueId('vmsnap-mover');
    const onB = (...args: string[]) => virsh({ ...b.vars, LIBVIRT_DEFAULT_URI: need(b.vars, 'LIBVIRT_B_URI') }, ...args);
    try {
      await leftoverOfA(disk, wf);
      writeFileSync(
        path.join(dir, 'mover.xml'),
        `<domain type='qemu'><name>${vm}</name><memory unit='MiB'>64</memory><os><type arch='x86_64' machine='pc'>hvm</type></os>` +
          `<devices><disk type='network' device='disk'><source protocol='rbd' name='vms/${disk}'/><target dev='vdb' bus='virtio'/></disk></devices></domain>`,
      );
      // What is left on hv-b after the operator migrated the kept VM there and shut it off.
      await onB('define', path.join(dir, 'mover.xml'));
      expect(await onB('domstate', vm)).toBe('shut off');

      const r = await reaperOf(a).sweep();
      expect(r.restore.removed.filter((x) => x.includes(disk))).toEqual([]);
      expect(r.restore.kept).toContainEqual({ disk: `vms/${disk}`, reason: expect.stringContaining(`in use: domain ${vm} on ${b.config.host}`) });
      expect(await ceph.images('vms')).toContain(disk);

      await onB('undefine', vm);
      expect((await reaperOf(a).sweep()).restore.removed).toContain(`vms/${disk} (restore ${wf} TERMINATED)`);
      expect(await ceph.images('vms')).not.toContain(disk);
    } finally {
      await onB('undefine', vm).catch(() => undefined);
      await ceph.removeImage('vms', disk).catch(() => undefined);
    }
  }, 300_000);

  it('a leftover whose lock a dead client still holds is kept: the lock is not broken, nobody blocklisted', async () => {
    const wf = await terminatedRestore();
    const disk = uniqueId('vmsnap-locked');
    const env = cephTestEnv();
    try {
      await leftoverOfA(disk, wf);
      const locker = await deadLockOwner(dir, env, await a.hw.deps.ioctx('vms'), disk, (...x) => ceph.rbd(...x));
      const listedBefore = blocklist(env);

      const r = await reaperOf(a).sweep();
      expect(r.restore.removed.filter((x) => x.includes(disk))).toEqual([]);
      expect(r.restore.kept).toContainEqual({ disk: `vms/${disk}`, reason: expect.stringContaining(`locked by ${locker[0]!.locker}`) });
      expect(await ceph.images('vms')).toContain(disk);
      expect(JSON.parse(await ceph.rbd('lock', 'ls', '--format', 'json', `vms/${disk}`))).toEqual(locker);
      expect(blocklist(env)).toEqual(listedBefore);
    } finally {
      await ceph.removeImage('vms', disk).catch(() => undefined);
    }
  }, 300_000);
});
