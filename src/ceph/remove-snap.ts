import type { Image } from './image';

/**
 * rbd_snap_unprotect (when protected) + rbd_snap_remove, if the snapshot is there at all. Returns
 * whether it existed. The one way vmsnap drops a snapshot it made: compensation, finalize,
 * cleanup and the orphan reaper all go through it.
 */
export async function removeSnapIfPresent(img: Image, snap: string): Promise<boolean> {
  if (!(await img.snapExists(snap))) return false;
  if (await img.isSnapProtected(snap)) await img.unprotectSnap(snap);
  await img.removeSnap(snap);
  return true;
}
