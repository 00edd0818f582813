import { beforeAll, describe, expect, it } from 'vitest';
import {
  cloneImage, createGroup, createImage, addGroupImage, listGroupImages, removeGroupImage, createGroupSnap,
  listGroupSnaps, removeGroupSnap, isExists, isNotFound, openImage, removeGroup, removeImage, type IoCtx,
} from '../../src/ceph';
import { uniqueName } from '../../support/ceph';
import { cephSuite } from '../helpers/ceph-suite';

const MiB = 1 << 20;

describe('ceph groups and group snapshots', () => {
  const t = cephSuite();
  const { cleanups } = t;
  let io: IoCtx;
  let images: IoCtx;
  beforeAll(() => {
    ({ io, images } = t);
  });

  it('creates a group of two disks, snapshots it, lists and removes; group snapshots cannot be cloned in Ceph 16', async () => {
    const disks = [uniqueName('disk'), uniqueName('disk')];
    for (const d of disks) {
      await createImage(io, d, 4 * MiB);
      cleanups.defer(`image ${d}`, () => removeImage(io, d));
    }
    const group = uniqueName('grp');
    await createGroup(io, group);
    cleanups.defer(`group ${group}`, () => removeGroup(io, group));
    expect(isExists(await createGroup(io, group).catch((e: unknown) => e))).toBe(true);
    for (const d of disks) {
      await addGroupImage(io, group, io, d);
      cleanups.defer(`membership ${d}`, () => removeGroupImage(io, group, io, d));
    }
    expect((await listGroupImages(io, group)).map((i) => i.image).sort()).toEqual([...disks].sort());

    const t0 = performance.now();
    await createGroupSnap(io, group, 'gs1');
    const ms = performance.now() - t0;
    expect(await listGroupSnaps(io, group)).toEqual([{ name: 'gs1', state: 'complete' }]);

    // What the member image sees: a snapshot in the 'group' namespace with a generated name.
    const img = await openImage(io, disks[0]!);
    const snaps = await img.listSnaps();
    await img.close();
    console.log(`[ceph-group] group snap of 2 images: ${ms.toFixed(0)} ms; member snapshots: ${JSON.stringify(snaps)}`);
    expect(snaps).toHaveLength(1);
    expect(snaps[0]!.namespace).toBe('group');
    expect(snaps[0]!.name).not.toBe('gs1');

    // Ceph 16.2.15: neither the group snapshot's name nor the member's generated name clones.
    const byGroupName = await cloneImage(io, disks[0]!, 'gs1', images, uniqueName('c')).catch((e: unknown) => e);
    expect(isNotFound(byGroupName)).toBe(true);
    expect(byGroupName).toMatchObject({ errno: 2, call: 'rbd_clone3' });
    const byMemberName = await cloneImage(io, disks[0]!, snaps[0]!.name, images, uniqueName('c')).catch((e: unknown) => e);
    expect(isNotFound(byMemberName)).toBe(true);
    // ...nor can the member snapshot be opened by name.
    expect(isNotFound(await openImage(io, disks[0]!, { snap: 'gs1', readOnly: true }).catch((e: unknown) => e))).toBe(true);

    await removeGroupSnap(io, group, 'gs1');
    expect(await listGroupSnaps(io, group)).toEqual([]);
    expect(isNotFound(await removeGroupSnap(io, group, 'gs1').catch((e: unknown) => e))).toBe(true);
  });

  it('the approach used instead: one user snapshot per image in one freeze window, each clonable', async () => {
    const disks = [uniqueName('disk'), uniqueName('disk')];
    const handles = [];
    for (const d of disks) {
      await createImage(io, d, 4 * MiB);
      cleanups.defer(`image ${d}`, async () => {
        const i = await openImage(io, d);
        await i.removeSnap('vmsnap-1').catch(() => {});
        await i.close();
        await removeImage(io, d);
      });
      handles.push(await openImage(io, d));
    }
    // (guest frozen here)
    const t0 = performance.now();
    await Promise.all(handles.map((h) => h.createSnap('vmsnap-1')));
    const ms = performance.now() - t0;
    // (guest thawed here)
    console.log(`[ceph-group] per-image user snapshots of 2 images in parallel: ${ms.toFixed(0)} ms`);
    for (const d of disks) {
      const c = uniqueName('c');
      await cloneImage(io, d, 'vmsnap-1', images, c);
      cleanups.defer(`clone ${c}`, () => removeImage(images, c));
    }
    await Promise.all(handles.map((h) => h.close()));
  });
});
