import { openImage } from '../src/ceph';
import { snapOwnerKey } from '../src/model/types';
import type { RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { translating } from './failures';
import { removeSourceSnap } from './finalize';

export interface PrepareRequest {
  workflowId: string;
  snaps: { source: RbdLocation; snap: string }[];
  timeoutMs: number;
}

/**
 * Everything that can happen before the freeze, so the window holds only freeze → snapshot →
 * thaw: remove snapshots a dead earlier attempt of this run left under its names, record this
 * workflow as the owner of the snapshots about to be taken (for the orphan reaper), and have the
 * snapshotter open the images now rather than inside the window.
 */
export function prepareSnapshots(deps: ActivityDeps) {
  return async function prepareSnapshots(req: PrepareRequest): Promise<{ removedStale: string[] }> {
    const removedStale: string[] = [];
    for (const { source, snap } of req.snaps) {
      if (await removeSourceSnap(deps, source, snap)) removedStale.push(`${source.pool}/${source.image}@${snap}`);
      const io = await deps.ioctx(source.pool, source.namespace);
      const img = await translating('open source image', () => openImage(io, source.image));
      try {
        await translating('record snapshot owner', () => img.metadataSet(snapOwnerKey(snap), req.workflowId));
      } finally {
        await img.close();
      }
    }
    // Best effort: a failure here only means the snapshot opens the image inside the window.
    await deps.snapshotter
      .prepare(
        req.snaps.map((s) => ({ pool: s.source.pool, namespace: s.source.namespace, image: s.source.image, snap: s.snap })),
        { timeoutMs: req.timeoutMs },
      )
      .catch(() => undefined);
    return { removedStale };
  };
}
