import type { IoCtx } from './cluster';
import { rbdCall } from './errors';
import { native } from './native';

/*
 * RBD groups and group snapshots.
 *
 * Ceph 16.2.15 (Pacific) cannot clone, export or open a group snapshot by name: the per-image
 * snapshots a group snapshot makes live in the "group" snapshot namespace (listSnaps shows
 * them with namespace 'group' and a generated name), and rbd_clone3 only resolves user
 * snapshot names, so cloning from one fails ENOENT (test/integration/ceph-group.test.ts shows it).
 * Group snapshots there can only be listed, rolled back and removed.
 *
 * vmsnap's approach: crash/app-consistent multi-disk snapshots come from taking one user
 * snapshot per image (Image.createSnap, or Snapshotter.createSnaps for a bounded call) while the
 * guest is frozen once; those snapshots clone normally. Group snapshots are future work for
 * Ceph releases that can clone them.
 */

export interface GroupImage {
  image: string;
  poolId: number;
  state: 'attached' | 'incomplete';
}

export interface GroupSnapInfo {
  name: string;
  state: 'complete' | 'incomplete';
}

/** rbd_group_create. */
export function createGroup(io: IoCtx, name: string): Promise<void> {
  return rbdCall(() => native().groupCreate(io.handle, name));
}

/** rbd_group_remove (also removes the group's snapshots; the images stay). */
export function removeGroup(io: IoCtx, name: string): Promise<void> {
  return rbdCall(() => native().groupRemove(io.handle, name));
}

/** rbd_group_image_add. */
export function addGroupImage(groupIo: IoCtx, group: string, imageIo: IoCtx, image: string): Promise<void> {
  return rbdCall(() => native().groupImageAdd(groupIo.handle, group, imageIo.handle, image));
}

/** rbd_group_image_remove. */
export function removeGroupImage(groupIo: IoCtx, group: string, imageIo: IoCtx, image: string): Promise<void> {
  return rbdCall(() => native().groupImageRemove(groupIo.handle, group, imageIo.handle, image));
}

/** rbd_group_image_list. */
export async function listGroupImages(io: IoCtx, group: string): Promise<GroupImage[]> {
  const list = await rbdCall(() => native().groupImageList(io.handle, group));
  return list.map((i) => ({ image: i.image, poolId: i.poolId, state: i.state === 'attached' ? 'attached' : 'incomplete' }));
}

/** rbd_group_snap_create: one consistent snapshot of every image in the group. Not clonable in Ceph 16. */
export function createGroupSnap(io: IoCtx, group: string, snap: string): Promise<void> {
  return rbdCall(() => native().groupSnapCreate(io.handle, group, snap));
}

/** rbd_group_snap_list. */
export async function listGroupSnaps(io: IoCtx, group: string): Promise<GroupSnapInfo[]> {
  const list = await rbdCall(() => native().groupSnapList(io.handle, group));
  return list.map((s) => ({ name: s.name, state: s.state === 'complete' ? 'complete' : 'incomplete' }));
}

/** rbd_group_snap_remove. */
export function removeGroupSnap(io: IoCtx, group: string, snap: string): Promise<void> {
  return rbdCall(() => native().groupSnapRemove(io.handle, group, snap));
}
