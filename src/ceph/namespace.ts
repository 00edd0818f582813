import type { IoCtx } from './cluster';
import { rbdCall } from './errors';
import { native } from './native';

/*
 * RBD namespaces: separate image name spaces inside one pool. Tests use one UUID-named
 * namespace each, so they never see each other's images.
 */

/** rbd_namespace_create (io must be opened without a namespace). */
export function createNamespace(io: IoCtx, name: string): Promise<void> {
  return rbdCall(() => native().namespaceCreate(io.handle, name));
}

/** rbd_namespace_remove (fails ENOTEMPTY/EBUSY while it holds images). */
export function removeNamespace(io: IoCtx, name: string): Promise<void> {
  return rbdCall(() => native().namespaceRemove(io.handle, name));
}

/** rbd_namespace_exists. */
export function namespaceExists(io: IoCtx, name: string): Promise<boolean> {
  return rbdCall(() => native().namespaceExists(io.handle, name));
}
