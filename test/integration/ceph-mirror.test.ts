import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RadosCluster, Snapshotter, createImage, isBusy, listImages, openImage, removeImage, type Image, type IoCtx, type SnapRequest,
} from '../../src/ceph';
import { Cleanups, cephTestEnv, testCluster, uniqueName } from '../../support/ceph';
import { run } from '../../support/lab/cli-tools';
import { drSiteUp } from '../../support/lab/dr';
import type { LabDrEnv } from '../../support/lab/env';
import { blocklist, holderWrite, startHolder, stopHolder } from '../helpers/lock-holder';
import { until } from '../helpers/until';

/*
 * The mirroring calls of the librbd binding (native/mirror.cc, src/ceph/mirror.ts) and their
 * bounded path through the snapshotter child, against the lab cluster and its DR site (lab/dr.sh:
 * a second cluster whose rbd-mirror pulls `vms`). Images are the test's own, in the root namespace
 * of `vms` (rbd-mirror mirrors a namespace only where both sides enabled it).
 */

const env = cephTestEnv();
const MiB = 1 << 20;

describe('RBD mirroring in snapshot mode, lab cluster → DR site', () => {
  const cleanups = new Cleanups();
  let dr: LabDrEnv;
  let cluster: RadosCluster;
  let io: IoCtx;
  let drIo: IoCtx;
  let dir: string;
  /** The DR site's peer uuid on the lab cluster's vms pool: what a mirror snapshot must name. */
  let drPeerUuid: string;

  beforeAll(async () => {
    const t0 = performance.now();
    dr = await drSiteUp();
    console.log(`[ceph-mirror] lab/dr.sh up: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    cluster = await testCluster(cleanups, env);
    io = await cleanups.add(cluster.openIoCtx(env.vmPool), (i) => i.close(), 'ioctx vms');
    const drCluster = await cleanups.add(RadosCluster.connect({ conf: dr.conf, id: dr.vmsnapId, keyring: dr.vmsnapKeyring, connectTimeoutSec: 10 }), (c) => c.shutdown(), 'dr cluster');
    drIo = await cleanups.add(drCluster.openIoCtx(dr.pool), (i) => i.close(), 'dr ioctx vms');
    dir = mkdtempSync(path.join(tmpdir(), 'vmsnap-mirror-'));
    cleanups.defer('tmpdir', () => rm(dir, { recursive: true }));
    const info = JSON.parse((await run('rbd', ['-c', env.conf, '--id', env.id, '--keyring', env.keyring!, 'mirror', 'pool', 'info', env.vmPool, '--format', 'json'])).stdout) as {
      peers: { uuid: string; site_name: string; direction: string }[];
    };
    drPeerUuid = info.peers.find((p) => p.site_name === dr.site && p.direction === 'tx-only')!.uuid;
  });
  afterAll(() => cleanups.run());

  /** A fresh image in vms; removed at the end (mirroring off first, which removes its mirror snapshots). */
  async function newImage(): Promise<string> {
    const name = uniqueName('mirror');
    await createImage(io, name, 16 * MiB);
    cleanups.defer(`image ${name}`, async () => {
      const img = await openImage(io, name);
      if ((await img.getMirrorInfo()).state === 'enabled') await img.disableMirroring();
      for (const s of await img.listSnaps()) if (s.namespace === 'user') await img.removeSnap(s.name);
      await img.close();
      for (let t0 = Date.now(); ; ) {
        try {
          return await removeImage(io, name);
        } catch (e) {
          if (!isBusy(e) || Date.now() - t0 > 60_000) throw e;
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
    });
    return name;
  }

  async function withImage<T>(ioctx: IoCtx, name: string, fn: (img: Image) => Promise<T>, readOnly = false): Promise<T> {
    const img = await openImage(ioctx, name, { readOnly });
    try {
      return await fn(img);
    } finally {
      await img.close();
    }
  }

  /** The DR copy's snapshot that copies primary snapshot `primarySnapId`, once complete; undefined until then. */
  async function copyOf(name: string, primarySnapId: number) {
    return withImage(drIo, name, async (img) => {
      for (const s of await img.listSnaps()) {
        if (s.namespace !== 'mirror') continue;
        const ns = await img.getSnapMirrorNamespace(s.id);
        if (ns.primarySnapId === primarySnapId && ns.complete) return { snap: s, ns, info: await img.getMirrorInfo() };
      }
      return undefined;
    }, true).catch(() => undefined);
  }

  it('reads an image that does not mirror as disabled (its mode reads as librbd\'s zero value, journal) and refuses a mirror snapshot of it', async () => {
    const name = await newImage();
    await withImage(io, name, async (img) => {
      expect(await img.getMirrorInfo()).toMatchObject({ state: 'disabled', primary: false });
      expect(await img.getMirrorMode()).toBe('journal');
      await expect(img.createMirrorSnap()).rejects.toMatchObject({ call: 'rbd_mirror_image_create_snapshot', code: 'EINVAL' });
    });
  });

  it('enables snapshot mode, takes a mirror snapshot, and the DR site has its complete copy with the data', async () => {
    const name = await newImage();
    const pattern = Buffer.alloc(64 * 1024, 0x5a);
    const { id, globalId } = await withImage(io, name, async (img) => {
      await img.enableMirroring('snapshot');
      const info = await img.getMirrorInfo();
      expect(info).toMatchObject({ state: 'enabled', primary: true });
      expect(info.globalId).toMatch(/^[0-9a-f-]{36}$/);
      expect(await img.getMirrorMode()).toBe('snapshot');
      await img.write(MiB, pattern);
      const id = await img.createMirrorSnap();
      const ns = await img.getSnapMirrorNamespace(id);
      expect(ns).toMatchObject({ state: 'primary' });
      expect(ns.mirrorPeerUuids).toContain(drPeerUuid);
      const snaps = await img.listSnaps();
      expect(snaps.find((s) => s.id === id)).toMatchObject({ namespace: 'mirror' });
      const status = await img.getMirrorStatus();
      expect(status).toMatchObject({ name, info: { globalId: info.globalId, state: 'enabled', primary: true } });
      expect(Array.isArray(status.siteStatuses)).toBe(true);
      await expect(img.getSnapMirrorNamespace(snaps.find((s) => s.namespace !== 'mirror')?.id ?? 0)).rejects.toMatchObject({ call: 'rbd_snap_get_mirror_namespace' });
      return { id, globalId: info.globalId };
    });
    const t0 = performance.now();
    const copy = await until('the DR copy of the mirror snapshot', () => copyOf(name, id), 60_000, 200);
    console.log(`[ceph-mirror] mirror snapshot ${id} complete on the DR site ${(performance.now() - t0).toFixed(0)} ms after it was taken`);
    expect(copy.ns).toMatchObject({ state: 'non-primary', complete: true, primarySnapId: id });
    expect(copy.info).toMatchObject({ state: 'enabled', primary: false, globalId });
    const read = await withImage(drIo, name, (img) => img.read(MiB, pattern.length), true);
    expect(read.equals(pattern)).toBe(true);
  });

  it('disabling mirroring removes the mirror snapshots, and rbd-mirror removes the DR copy', async () => {
    const name = await newImage();
    const id = await withImage(io, name, async (img) => {
      await img.enableMirroring('snapshot');
      return img.createMirrorSnap();
    });
    await until('the DR copy', () => copyOf(name, id), 60_000, 200);
    await withImage(io, name, async (img) => {
      await img.disableMirroring();
      expect((await img.listSnaps()).filter((s) => s.namespace === 'mirror')).toEqual([]);
      expect(await img.getMirrorInfo()).toMatchObject({ state: 'disabled' });
    });
    const drNames = async () => (await listImages(drIo)).includes(name);
    await until('rbd-mirror to remove the DR copy', async () => !(await drNames()), 60_000, 500);
  });

  it('through the snapshotter child: mirror state and mirror snapshots, bounded like a snapshot when the lock owner is stopped', async () => {
    const name = await newImage();
    await withImage(io, name, (img) => img.enableMirroring('snapshot'));
    const snapshotter = await cleanups.add(new Snapshotter({ ...env, idleCloseMs: 500, evictWith: cluster }), (s) => s.close(), 'snapshotter');
    const { proc: holder } = await startHolder(dir, env, io, name);
    cleanups.defer('holder', () => stopHolder(holder));
    const req: SnapRequest = { pool: io.pool, image: name, snap: '' };
    const states = await snapshotter.mirrorStates([req], { timeoutMs: 5000 });
    expect(states.get(req)).toEqual({ state: 'enabled', primary: true, mode: 'snapshot' });

    const healthy = await snapshotter.createMirrorSnaps([req], { timeoutMs: 5000 });
    expect(healthy).toMatchObject({ created: [req], failed: [], timedOut: false });
    const id = healthy.snapIds.get(req)!;
    expect(id).toBeGreaterThan(0);
    await until('the DR copy', () => copyOf(name, id), 60_000, 200);

    const mirrorSnaps = () => withImage(io, name, async (img) => (await img.listSnaps()).filter((s) => s.namespace === 'mirror').map((s) => s.id), true);
    const before = await mirrorSnaps();
    const blocklistBefore = blocklist(env);
    holder.kill('SIGSTOP');
    const t0 = performance.now();
    const r = await snapshotter.createMirrorSnaps([req], { timeoutMs: 3000 });
    const elapsed = performance.now() - t0;
    await new Promise((res) => setTimeout(res, 500));
    holder.kill('SIGCONT');
    expect(r).toMatchObject({ created: [], failed: [], timedOut: true, mayCompleteLate: [req] });
    expect(elapsed).toBeLessThan(4000);
    expect(snapshotter.pid).toBeUndefined();
    expect(await holderWrite(holder, 60_000)).toMatchObject({ ok: true });
    await snapshotter.settled();
    const evicted = snapshotter.evictions.map((e) => e.addrs);
    expect(blocklist(env).filter((a) => !evicted.includes(a))).toEqual(blocklistBefore.filter((a) => !evicted.includes(a)));
    // The owner, awake again, takes the request it was sent: a late mirror snapshot, like any other.
    const late = await until('the late mirror snapshot', async () => {
      const now = await mirrorSnaps();
      return now.some((s) => !before.includes(s)) ? now : undefined;
    }, 60_000, 500);
    console.log(`[ceph-mirror] bounded mirror snapshot returned in ${elapsed.toFixed(0)} ms (bound 3000); late snapshot ids ${late.filter((s) => !before.includes(s)).join(',')}`);
  });
});
