import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  RadosCluster, RbdError, createImage, imageExists, isExists, isNotEmpty, isNotFound, listImages, openImage,
  removeImage, type IoCtx,
} from '../../src/ceph';
import { fillImage, uniqueName } from '../../support/ceph';
import { cephSuite } from '../helpers/ceph-suite';

const MiB = 1 << 20;

describe('ceph image calls', () => {
  const t = cephSuite();
  const { cleanups } = t;
  let cluster: RadosCluster;
  let io: IoCtx;
  beforeAll(() => {
    ({ cluster, io } = t);
  });

  it('connects, reports the fsid, knows which pools exist', async () => {
    expect(await cluster.fsid()).toMatch(/^[0-9a-f-]{36}$/);
    expect(await cluster.poolExists(t.env.vmPool)).toBe(true);
    expect(await cluster.poolExists(uniqueName('nopool'))).toBe(false);
    const err = await cluster.openIoCtx(uniqueName('nopool')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RbdError);
    expect(err).toMatchObject({ errno: 2, code: 'ENOENT', call: 'rados_ioctx_create' });
  });

  it('creates, lists, opens, stats, removes an image with progress', async () => {
    const name = uniqueName('img');
    await createImage(io, name, 16 * MiB, { order: 20 });
    cleanups.defer(`image ${name}`, () => removeImage(io, name));
    expect(await listImages(io)).toContain(name);
    expect(await imageExists(io, name)).toBe(true);
    expect(await imageExists(io, uniqueName('none'))).toBe(false);

    const err = await createImage(io, name, MiB).catch((e: unknown) => e);
    expect(isExists(err)).toBe(true);
    expect(err).toMatchObject({ errno: 17, call: 'rbd_create4', message: 'rbd_create4: EEXIST (17)' });

    const img = await openImage(io, name);
    expect(await img.stat()).toEqual({ size: 16 * MiB, objSize: MiB, numObjs: 16, order: 20 });
    expect(typeof (await img.features())).toBe('bigint');
    await img.close();
    await img.close(); // idempotent

    const progress: [number, number][] = [];
    await removeImage(io, name, { onProgress: (d, t) => progress.push([d, t]) });
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.at(-1)![1]).toBe(16);
    expect(await imageExists(io, name)).toBe(false);
  });

  it('reports ENOENT with the call name for a missing image', async () => {
    const err = await openImage(io, uniqueName('none')).catch((e: unknown) => e);
    expect(isNotFound(err)).toBe(true);
    expect(err).toMatchObject({ errno: 2, code: 'ENOENT', call: 'rbd_open', message: 'rbd_open: ENOENT (2)' });
    const ro = await openImage(io, uniqueName('none'), { readOnly: true }).catch((e: unknown) => e);
    expect(ro).toMatchObject({ errno: 2, call: 'rbd_open_read_only' });
  });

  it('updates features and rebuilds the object map', async () => {
    const name = uniqueName('img');
    // layering | exclusive-lock | object-map | fast-diff | deep-flatten
    await createImage(io, name, 8 * MiB, { features: 1n | 4n | 8n | 16n | 32n });
    cleanups.defer(`image ${name}`, () => removeImage(io, name));
    const img = await cleanups.add(openImage(io, name), (i) => i.close(), `handle ${name}`);
    expect(await img.features()).toBe(61n);
    await img.updateFeatures(8n | 16n, false); // object-map + fast-diff off
    expect(await img.features()).toBe(37n);
    await img.updateFeatures(8n | 16n, true);
    expect(await img.features()).toBe(61n);
    await img.rebuildObjectMap();
  });

  it('reads, writes and checksums natively', async () => {
    const name = uniqueName('img');
    await createImage(io, name, 12 * MiB);
    cleanups.defer(`image ${name}`, () => removeImage(io, name));
    const img = await cleanups.add(openImage(io, name), (i) => i.close(), `handle ${name}`);
    await fillImage(img, 6 * MiB + 123);
    expect(await img.write(10 * MiB, Buffer.from('hello'))).toBe(5);
    expect((await img.read(10 * MiB, 5)).toString()).toBe('hello');
    expect((await img.read(12 * MiB - 2, 100)).length).toBe(2); // short read at the end

    const whole = await img.read(0, 12 * MiB);
    const expected = createHash('sha256').update(whole).digest('hex');
    expect(await img.checksum()).toBe(expected);
  });

  it('sets, gets, lists and removes metadata', async () => {
    const name = uniqueName('img');
    await createImage(io, name, MiB);
    cleanups.defer(`image ${name}`, () => removeImage(io, name));
    const img = await cleanups.add(openImage(io, name), (i) => i.close(), `handle ${name}`);
    expect(await img.getMetadata('vmsnap.owner')).toBeNull();
    await img.setMetadata('vmsnap.owner', 'wf-123');
    await img.setMetadata('vmsnap.long', 'x'.repeat(5000));
    expect(await img.getMetadata('vmsnap.owner')).toBe('wf-123');
    expect(await img.listMetadata()).toEqual({ 'vmsnap.owner': 'wf-123', 'vmsnap.long': 'x'.repeat(5000) });
    await img.removeMetadata('vmsnap.owner');
    expect(await img.getMetadata('vmsnap.owner')).toBeNull();
    expect(isNotFound(await img.removeMetadata('vmsnap.owner').catch((e: unknown) => e))).toBe(true);
  });

  it('refuses to remove an image with snapshots (ENOTEMPTY) and calls on a closed handle (EBADF)', async () => {
    const name = uniqueName('img');
    await createImage(io, name, MiB);
    cleanups.defer(`image ${name}`, () => removeImage(io, name));
    const img = await openImage(io, name);
    await img.createSnap('s1');
    await img.close();
    const err = await removeImage(io, name).catch((e: unknown) => e);
    expect(isNotEmpty(err)).toBe(true);
    expect(err).toMatchObject({ errno: 39, call: 'rbd_remove_with_progress' });
    expect(await img.stat().catch((e: unknown) => e)).toMatchObject({ errno: 9, code: 'EBADF', call: 'rbd_stat' });
    const again = await openImage(io, name);
    await again.removeSnap('s1');
    await again.close();
  });

  it('refuses shutdown while handles are open (EBUSY), then shuts down', async () => {
    const c = await RadosCluster.connect(t.env);
    const pio = await c.openIoCtx(t.env.vmPool);
    expect(await c.shutdown().catch((e: unknown) => e)).toMatchObject({ errno: 16, call: 'rados_shutdown' });
    await pio.close();
    await c.shutdown();
    expect(await c.fsid().catch((e: unknown) => e)).toMatchObject({ errno: 9 });
  });
});
