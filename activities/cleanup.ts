import { Context } from '@temporalio/activity';
import { imageExists, openImage, removeImage } from '../src/ceph';
import { IMAGE_SNAP, SNAP_PREFIX } from '../src/model/naming';
import type { RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { ownedBy } from './clone';
import { during } from './step-error';
import { removeSourceSnaps as removeSnaps } from '../src/host/source-snaps';
import { removeSnapIfPresent } from '../src/ceph/remove-snap';

export interface RemoveImagesRequest {
  workflowId: string;
  images: { image: RbdLocation; source: RbdLocation; snap: string }[];
}

/**
 * Compensation: removes the clones this workflow made (dependency order: before the source
 * snapshots they hang off). An image someone else owns is left alone and reported.
 */
export function removeImages(deps: ActivityDeps) {
  return async function removeImages(req: RemoveImagesRequest): Promise<{ removed: string[]; notOwned: string[] }> {
    const removed: string[] = [];
    const notOwned: string[] = [];
    for (const { image, source, snap } of req.images) {
      const io = await deps.ioctx(image.pool, image.namespace);
      if (!(await imageExists(io, image.image))) continue;
      const img = await during('open image', () => openImage(io, image.image));
      try {
        if (!(await ownedBy(img, req.workflowId, { image: source.image, snap }))) {
          notOwned.push(`${image.pool}/${image.image}`);
          continue;
        }
        await removeSnapIfPresent(img, IMAGE_SNAP);
      } finally {
        await img.close();
      }
      await during('remove image', () => removeImage(io, image.image));
      removed.push(`${image.pool}/${image.image}`);
    }
    return { removed, notOwned };
  };
}

export interface RemoveSnapsRequest {
  snaps: { source: RbdLocation; snap: string }[];
  /**
   * After a timed-out snapshot the request may still be carried out when the image's lock owner
   * wakes up: keep looking this long and remove a late arrival.
   */
  watchLateMs?: number;
}

/**
 * Compensation: removes this run's source snapshots, and late-created ones within the watch
 * (each call in the VM's snapshotter lane, bounded). After a timed-out snapshot (watchLateMs > 0)
 * an absent snapshot keeps its owner record past the watch: the orphan reaper removes one that
 * lands later still.
 */
export function removeSourceSnaps(deps: ActivityDeps) {
  return async function removeSourceSnaps(req: RemoveSnapsRequest): Promise<{ removed: string[] }> {
    const removed: string[] = [];
    const ours = req.snaps.filter((s) => s.snap.startsWith(SNAP_PREFIX)); // never a snapshot vmsnap did not name
    const lateMayLand = (req.watchLateMs ?? 0) > 0;
    const until = Date.now() + (req.watchLateMs ?? 0);
    for (;;) {
      removed.push(...(await removeSnaps(deps, ours, { lateMayLand })));
      if (Date.now() >= until) break;
      heartbeat({ removed });
      await new Promise((r) => setTimeout(r, 1000));
    }
    return { removed };
  };
}

function heartbeat(details: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // not in an activity context (direct call from the sweeper)
  }
}
