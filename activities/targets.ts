import { ApplicationFailure } from '@temporalio/common';
import { imageExists, laneKey, openImage } from '../src/ceph';
import { FailureType } from '../src/model/failures';
import { META } from '../src/model/types';
import type { DiskPlan } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { translating } from './failures';
import { readOwner, sourceSnapExists } from './source-snaps';

export interface TargetsRequest {
  workflowId: string;
  disks: DiskPlan[];
}

export interface TargetsState {
  /** Everything planned exists, belongs to this workflow id and was finalized: nothing to do. */
  complete: boolean;
  /** Half-done images of an earlier attempt of this workflow id (to remove before starting). */
  staleImages: DiskPlan[];
  /** Source snapshots of an earlier attempt (to remove: we cannot vouch for their freeze). */
  staleSnaps: DiskPlan[];
}

/**
 * Checks that the names this run will create are free — or are this workflow id's own from an
 * earlier run. Finished work makes the re-run a no-op; half-done work is reported for removal;
 * anything owned by someone else is a conflict, and then nothing is touched.
 */
export function checkTargets(deps: ActivityDeps) {
  return async function checkTargets(req: TargetsRequest): Promise<TargetsState> {
    const staleImages: DiskPlan[] = [];
    const staleSnaps: DiskPlan[] = [];
    let finished = 0;
    const lane = laneKey(req.disks.map((d) => ({ ...d.source, snap: d.sourceSnap }))); // the VM's snapshotter lane
    for (const d of req.disks) {
      if (d.image) {
        if (await imageDone(deps, d, req.workflowId, staleImages)) finished++;
        else if ((await sourceSnapState(deps, d, lane)).exists) staleSnaps.push(d);
      } else {
        // Snapshot-only: the kept snapshot is the result, marked done in its owner record.
        const src = await sourceSnapState(deps, d, lane);
        if (src.done) finished++;
        else if (src.exists) staleSnaps.push(d);
      }
    }
    const complete = finished === req.disks.length;
    return complete ? { complete, staleImages: [], staleSnaps: [] } : { complete, staleImages, staleSnaps };
  };
}

async function imageDone(deps: ActivityDeps, d: DiskPlan, workflowId: string, stale: DiskPlan[]): Promise<boolean> {
  const target = d.image!;
  const io = await deps.ioctx(target.pool, target.namespace);
  if (!(await translating('check target image', () => imageExists(io, target.image)))) return false;
  const img = await translating('open target image', () => openImage(io, target.image));
  try {
    const owner = await img.metadataGet(META.workflowId);
    if (owner !== workflowId) {
      throw ApplicationFailure.nonRetryable(
        `target image ${target.pool}/${target.image} already exists and was not created by workflow ${workflowId}`,
        FailureType.NameConflict,
      );
    }
    if ((await img.metadataGet(META.state)) === 'complete') return true;
    stale.push(d);
    return false;
  } finally {
    await img.close();
  }
}

/**
 * Whether this run's snapshot exists on the source image (in the VM's snapshotter lane: no
 * librbd call in the worker's session), and whether its owner record marks it a kept result.
 */
async function sourceSnapState(deps: ActivityDeps, d: DiskPlan, lane: string): Promise<{ exists: boolean; done: boolean }> {
  const exists = await sourceSnapExists(deps, d.source, d.sourceSnap, lane);
  return { exists, done: exists && (await readOwner(deps, d.source, d.sourceSnap))?.state === 'kept' };
}
