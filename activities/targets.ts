import { ApplicationFailure } from '@temporalio/common';
import { imageExists, laneKey, openImage } from '../src/ceph';
import { FailureType } from '../src/model/failures';
import { recordFromMeta, recordFromObject } from '../src/model/quiesce-record';
import type { FoundRecord, QuiesceRecord } from '../src/model/quiesce-record';
import { META } from '../src/model/types';
import type { DiskPlan } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';
import { readOwner, sourceSnapExists } from '../src/host/source-snaps';

export interface TargetsRequest {
  workflowId: string;
  disks: DiskPlan[];
  /** The same disks under the hashed names runs used before names were readable (src/model/naming.ts). */
  legacyDisks?: DiskPlan[];
}

export interface TargetsState {
  /** Everything planned exists, belongs to this workflow id and was finalized: nothing to do. */
  complete: boolean;
  /** Half-done images of an earlier attempt of this workflow id (to remove before starting). */
  staleImages: DiskPlan[];
  /** Source snapshots of an earlier attempt (to remove: we cannot vouch for their freeze). */
  staleSnaps: DiskPlan[];
  /** When complete: what each disk's result records about its freeze (for the reused result). */
  records?: FoundRecord[];
  /** An earlier run of this id used the legacy names: the state is theirs, and the run goes on with them. */
  legacyNames?: boolean;
}

/**
 * Checks that the names this run will create are free — or are this workflow id's own from an
 * earlier run. Finished work makes the re-run a no-op; half-done work is reported for removal;
 * anything owned by someone else is a conflict, and then nothing is touched.
 */
export function checkTargets(deps: ActivityDeps) {
  return async function checkTargets(req: TargetsRequest): Promise<TargetsState> {
    if (req.legacyDisks && (await anyOwnLegacy(deps, req.workflowId, req.legacyDisks))) {
      return { ...(await stateOf(deps, req.workflowId, req.legacyDisks)), legacyNames: true };
    }
    return stateOf(deps, req.workflowId, req.disks);
  };
}

/** An image (ours) or a source snapshot under a legacy name exists. */
async function anyOwnLegacy(deps: ActivityDeps, workflowId: string, disks: DiskPlan[]): Promise<boolean> {
  const lane = laneKey(disks.map((d) => ({ ...d.source, snap: d.sourceSnap })));
  for (const d of disks) {
    if (d.image) {
      const io = await deps.ioctx(d.image.pool, d.image.namespace);
      if (await during('check legacy target image', () => imageExists(io, d.image!.image))) {
        const img = await during('open legacy target image', () => openImage(io, d.image!.image, { readOnly: true }));
        try {
          if ((await img.getMetadata(META.workflowId)) === workflowId) return true;
        } finally {
          await img.close();
        }
      }
    }
    if ((await sourceSnapState(deps, d, lane)).exists) return true;
  }
  return false;
}

async function stateOf(deps: ActivityDeps, workflowId: string, disks: DiskPlan[]): Promise<TargetsState> {
  const staleImages: DiskPlan[] = [];
  const staleSnaps: DiskPlan[] = [];
  const lane = laneKey(disks.map((d) => ({ ...d.source, snap: d.sourceSnap }))); // the VM's snapshotter lane
  const records: FoundRecord[] = [];
  const finished: DiskPlan[] = [];
  for (const d of disks) {
    if (d.image) {
      const done = await imageDone(deps, d, workflowId, staleImages);
      if (done) {
        finished.push(d);
        records.push({ target: d.target, record: done.record });
      } else if ((await sourceSnapState(deps, d, lane)).exists) staleSnaps.push(d);
    } else {
      // Snapshot-only: the kept snapshot is the result; its owner record says whether it is done and how it was made.
      const src = await sourceSnapState(deps, d, lane);
      if (src.done) {
        finished.push(d);
        records.push({ target: d.target, record: src.record });
      } else if (src.exists) staleSnaps.push(d);
    }
  }
  if (finished.length === disks.length) return { complete: true, staleImages: [], staleSnaps: [], records };
  // Some disks finished, not all: this run freezes again, and one result must come from one
  // freeze, so the finished images of the earlier freeze go too (kept snapshots are replaced by prepare).
  return { complete: false, staleImages: [...staleImages, ...finished.filter((d) => d.image)], staleSnaps };
}

async function imageDone(deps: ActivityDeps, d: DiskPlan, workflowId: string, stale: DiskPlan[]): Promise<{ record?: QuiesceRecord } | undefined> {
  const target = d.image!;
  const io = await deps.ioctx(target.pool, target.namespace);
  if (!(await during('check target image', () => imageExists(io, target.image)))) return undefined;
  const img = await during('open target image', () => openImage(io, target.image));
  try {
    const owner = await img.getMetadata(META.workflowId);
    if (owner !== workflowId) {
      throw ApplicationFailure.nonRetryable(
        `target image ${target.pool}/${target.image} already exists and was not created by workflow ${workflowId}`,
        FailureType.NameConflict,
      );
    }
    if ((await img.getMetadata(META.state)) === 'complete') {
      const meta = await img.listMetadata();
      return { record: recordFromMeta((k) => meta[k], { quiesced: META.quiesced, frozenFilesystems: META.frozenFilesystems, frozenAt: META.frozenAt, reason: META.quiesceReason }) };
    }
    stale.push(d);
    return undefined;
  } finally {
    await img.close();
  }
}

/**
 * Whether this run's snapshot exists on the source image (in the VM's snapshotter lane: no
 * librbd call in the worker's session), and whether its owner record marks it a kept result.
 */
async function sourceSnapState(deps: ActivityDeps, d: DiskPlan, lane: string): Promise<{ exists: boolean; done: boolean; record?: QuiesceRecord }> {
  const exists = await sourceSnapExists(deps, d.source, d.sourceSnap, lane);
  const owner = exists ? await readOwner(deps, d.source, d.sourceSnap) : null;
  const done = owner?.state === 'kept';
  return { exists, done, ...(done ? { record: recordFromObject(owner) } : {}) };
}
