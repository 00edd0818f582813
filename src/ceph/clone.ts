import type { IoCtx } from './cluster';
import { rbdCall } from './errors';
import type { Image } from './image';
import { native } from './native';

/*
 * Clones and their parent/child links. With `require_min_compat_client >= mimic` librbd makes
 * clone v2 by default: no snapshot protect needed. On older clusters (or format: 1) the parent
 * snapshot must be protected first, and unprotect fails EBUSY while children exist.
 */

export interface CloneOptions {
  features?: bigint | number;
  order?: number;
  /** 2 = clone v2 (no protect), 1 = v1 (parent snap must be protected); librbd decides when absent. */
  format?: 1 | 2;
}

export interface ParentSpec {
  pool: string;
  namespace: string;
  image: string;
  snap: string;
}

export interface ChildSpec {
  pool: string;
  namespace: string;
  image: string;
  /** The child is in the trash. */
  trash: boolean;
}

/** rbd_clone3. */
export function cloneImage(
  parentIo: IoCtx,
  parentName: string,
  snapName: string,
  childIo: IoCtx,
  childName: string,
  o: CloneOptions = {},
): Promise<void> {
  return rbdCall(() =>
    native().cloneImage(parentIo.handle, parentName, snapName, childIo.handle, childName, o.features, o.order, o.format),
  );
}

/** rbd_get_parent: null when the image has no parent (never cloned, or flattened). */
export async function parent(image: Image): Promise<ParentSpec | null> {
  const p = await rbdCall(() => native().parent(image.handle));
  return p && { pool: p.pool, namespace: p.namespace, image: p.image, snap: p.snap };
}

/**
 * rbd_list_children3: the clones of every snapshot of the image (opened at HEAD) or of the
 * snapshot it was opened at; clone v1 and v2.
 */
export function listChildren(image: Image): Promise<ChildSpec[]> {
  return rbdCall(() => native().listChildren(image.handle));
}
