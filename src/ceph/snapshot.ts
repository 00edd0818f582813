import { rbdCall } from './errors';
import type { Image } from './image';
import { native } from './native';

/*
 * Image snapshots (user namespace). Two concurrent rbd_snap_create of one name can both
 * return 0 and leave one snapshot (librbd ignores EEXIST on that path): EEXIST is not a lock,
 * serialize snapshots per VM in the caller.
 */

export interface SnapInfo {
  id: number;
  name: string;
  size: number;
  /** 'user' for ordinary snapshots; 'group' for the per-image part of a group snapshot; 'trash'. */
  namespace: string;
}

/** rbd_snap_list (+ rbd_snap_get_namespace_type). */
export function listSnaps(image: Image): Promise<SnapInfo[]> {
  return rbdCall(() => native().snapList(image.handle));
}

/** rbd_snap_exists. */
export function snapExists(image: Image, name: string): Promise<boolean> {
  return rbdCall(() => native().snapExists(image.handle, name));
}

/**
 * rbd_snap_create. Blocks while the exclusive-lock owner is unresponsive (~29 s, then breaks its
 * lock): for a live VM's disk use {@link Snapshotter} from './snapshotter', which bounds it.
 */
export function createSnap(image: Image, name: string): Promise<void> {
  return rbdCall(() => native().snapCreate(image.handle, name));
}

/** rbd_snap_remove. With clone-v2 children the snapshot moves to the trash namespace. */
export function removeSnap(image: Image, name: string): Promise<void> {
  return rbdCall(() => native().snapRemove(image.handle, name));
}

/** rbd_snap_protect (only needed for clone v1). */
export function protectSnap(image: Image, name: string): Promise<void> {
  return rbdCall(() => native().snapProtect(image.handle, name));
}

/** rbd_snap_unprotect. EBUSY (16) while clones of the snapshot exist. */
export function unprotectSnap(image: Image, name: string): Promise<void> {
  return rbdCall(() => native().snapUnprotect(image.handle, name));
}

/** rbd_snap_is_protected. */
export function isSnapProtected(image: Image, name: string): Promise<boolean> {
  return rbdCall(() => native().snapIsProtected(image.handle, name));
}
