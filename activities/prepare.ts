import type { RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { recordOwner, removeSourceSnaps } from '../src/host/source-snaps';

export interface PrepareRequest {
  workflowId: string;
  snaps: { source: RbdLocation; snap: string }[];
  timeoutMs: number;
  /** Recorded in the owner records when given. */
  domainUuid?: string;
}

/**
 * Everything that can happen before the freeze, so the window holds only freeze → snapshot →
 * thaw: have the VM's snapshotter lane open the images now rather than inside the window, remove
 * snapshots a dead earlier attempt of this run left under its names, and record this workflow as
 * the owner of the snapshots about to be taken (for the orphan reaper). No librbd call here runs
 * in the worker's session: the lane's calls are bounded and killable, the record is an omap
 * entry of a vmsnap-owned object, not image metadata (which would go through the VM's QEMU).
 */
export function prepareSnapshots(deps: ActivityDeps) {
  return async function prepareSnapshots(req: PrepareRequest): Promise<{ removedStale: string[] }> {
    // Best effort: a failure here only means the snapshot opens the image inside the window.
    await deps.snapshotter
      .prepare(
        req.snaps.map((s) => ({ pool: s.source.pool, namespace: s.source.namespace, image: s.source.image, snap: s.snap })),
        { timeoutMs: req.timeoutMs },
      )
      .catch(() => undefined);
    // The stale snapshots' records are rewritten below: a late one keeps an owner either way.
    const removedStale = await removeSourceSnaps(deps, req.snaps, { lateMayLand: true });
    const recordedAt = new Date().toISOString();
    for (const { source, snap } of req.snaps) {
      await recordOwner(deps, source, snap, {
        workflowId: req.workflowId,
        ...deps.scope,
        ...(req.domainUuid ? { domainUuid: req.domainUuid } : {}),
        recordedAt,
        state: 'pending',
      });
    }
    return { removedStale };
  };
}
