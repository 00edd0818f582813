import { ApplicationFailure } from '@temporalio/common';
import { laneKey, listOmapValues, removeOmapKey, setOmapValue } from '../ceph';
import type { OmapCliOptions, SnapRequest, SnapshotterPool } from '../ceph';
import { FailureType } from '../model/failures';
import { OWNER_OBJECT, decodeOwnerRecord, encodeOwnerRecord, ownerKey, parseOwnerKey } from '../model/owner-record';
import type { OwnerRecord } from '../model/owner-record';
import type { RbdLocation } from '../model/types';

/*
 * vmsnap's snapshots on live source images, without a librbd call in the worker's own session:
 * snapshot existence and removal run in the VM's snapshotter lane (bounded, killable), and the
 * owner record lives in the pool's vmsnap-owned omap object (no image lock involved).
 */

/** What these calls need of a worker: the omap records' `rados` CLI and the VMs' snapshotter lanes. */
export interface SourceSnapDeps {
  radosCli: OmapCliOptions;
  snapshotter: SnapshotterPool;
}

/** Bound of one lane call on a source image from cleanup paths (the snapshot itself has its own). */
export const SOURCE_CALL_MS = 8000;

const target = (loc: { pool: string; namespace?: string }) => ({ pool: loc.pool, namespace: loc.namespace, object: OWNER_OBJECT });
const req = (source: RbdLocation, snap: string): SnapRequest => ({ pool: source.pool, namespace: source.namespace, image: source.image, snap });

export async function recordOwner(deps: SourceSnapDeps, source: RbdLocation, snap: string, r: OwnerRecord): Promise<void> {
  await setOmapValue(deps.radosCli, target(source), ownerKey(source.image, snap), encodeOwnerRecord(r));
}

/** The records of one pool (namespace), by image and snapshot. */
export async function listOwners(
  deps: SourceSnapDeps,
  loc: { pool: string; namespace?: string },
): Promise<{ image: string; snap: string; record: OwnerRecord | null }[]> {
  const out = [];
  for (const [key, value] of await listOmapValues(deps.radosCli, target(loc))) {
    const k = parseOwnerKey(key);
    if (k) out.push({ ...k, record: decodeOwnerRecord(value) });
  }
  return out;
}

export async function readOwner(deps: SourceSnapDeps, source: RbdLocation, snap: string): Promise<OwnerRecord | null> {
  const all = await listOwners(deps, source);
  return all.find((o) => o.image === source.image && o.snap === snap)?.record ?? null;
}

export async function dropOwner(deps: SourceSnapDeps, source: RbdLocation, snap: string): Promise<void> {
  await removeOmapKey(deps.radosCli, target(source), ownerKey(source.image, snap));
}

/** rbd_snap_exists in the VM's lane; a timeout is a retryable failure of the calling activity. */
export async function sourceSnapExists(deps: SourceSnapDeps, source: RbdLocation, snap: string, lane?: string): Promise<boolean> {
  try {
    return await deps.snapshotter.snapExists(req(source, snap), { timeoutMs: SOURCE_CALL_MS, lane });
  } catch (err) {
    throw ApplicationFailure.retryable(`snapshot lookup ${source.pool}/${source.image}@${snap}: ${(err as Error).message}`, FailureType.SourceCallTimeout);
  }
}

/**
 * Removes vmsnap's snapshots from live source images (rbd_snap_remove in the VM's lane) and
 * returns those that existed. A record goes with its confirmed removal; when the snapshot is
 * absent, only if no late one can land (`lateMayLand` false), else the orphan reaper keeps
 * watching for it. Anything not answered within the bound fails the activity (retryable).
 */
export async function removeSourceSnaps(
  deps: SourceSnapDeps,
  snaps: { source: RbdLocation; snap: string }[],
  o: { lateMayLand: boolean },
): Promise<string[]> {
  if (!snaps.length) return [];
  // rbd_snap_exists reads the header; only a present snapshot is worth a removal request, which
  // goes through the image's lock owner (README, "Calls on a live image").
  const lane = laneKey(snaps.map((s) => req(s.source, s.snap))); // the VM's lane, whichever are present
  const present: SnapRequest[] = [];
  for (const s of snaps) {
    if (await sourceSnapExists(deps, s.source, s.snap, lane)) present.push(req(s.source, s.snap));
    // Absent, and a late one may still land: the record stays for the orphan reaper.
    else if (!o.lateMayLand) await dropOwner(deps, s.source, s.snap);
  }
  if (!present.length) return [];
  const r = await deps.snapshotter.removeSnaps(present, { timeoutMs: SOURCE_CALL_MS, lane });
  const name = (q: SnapRequest) => `${q.pool}/${q.image}@${q.snap}`;
  for (const q of [...r.removed, ...r.absent]) await dropOwner(deps, q, q.snap);
  const unsettled = [...r.failed.map((f) => `${name(f.request)}: ${f.error.message}`), ...[...r.mayCompleteLate, ...r.notSent].map((q) => `${name(q)}: no answer within ${SOURCE_CALL_MS} ms`)];
  if (unsettled.length) {
    throw ApplicationFailure.retryable(`removing source snapshots: ${unsettled.join('; ')}`, FailureType.SourceCallTimeout);
  }
  return r.removed.map(name);
}
