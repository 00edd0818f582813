import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { cloneImage, imageExists, openImage, removeImage } from '../src/ceph';
import type { Image } from '../src/ceph';
import { faultPoint } from '../src/host/fault-points';
import { FailureType } from '../src/model/failures';
import { restoreScopeMetadata } from '../src/model/restore-leftovers';
import { rbdSpec } from '../src/model/restore-plan';
import { RESTORE_META } from '../src/model/restore-point';
import type { RestoreDiskPlan } from '../src/model/restore-point';
import type { ActivityDeps } from './deps';
import { guardedFlatten } from './guarded-flatten';
import { during } from './step-error';

export interface RestoreDiskRequest {
  workflowId: string;
  disk: RestoreDiskPlan;
  /** A throw-away copy's disk: marked so, its domain is the reaper's too once the run is closed. */
  throwaway?: boolean;
}

/**
 * rbd_clone3 of image@snap into the VM pool, marked as this restore's before anything else can
 * see it. A clone this restore already made is reused, unless a flatten of it was interrupted
 * (re-running that corrupts data on Ceph 16, tracker 68998): then it is made again.
 */
export function cloneRestoreDisk(deps: ActivityDeps) {
  return async function cloneRestoreDisk(req: RestoreDiskRequest): Promise<{ reused: boolean }> {
    const { clone } = req.disk;
    const io = await deps.ioctx(clone.pool, clone.namespace);
    if (await imageExists(io, clone.image)) {
      const img = await openImage(io, clone.image);
      let interrupted: boolean;
      try {
        if ((await img.getMetadata(RESTORE_META.workflowId)) !== req.workflowId) {
          throw ApplicationFailure.nonRetryable(`${rbdSpec(clone)} exists and is not this restore's`, FailureType.NameConflict);
        }
        interrupted = (await img.getMetadata(RESTORE_META.flattenStarted)) !== null;
      } finally {
        await img.close();
      }
      if (!interrupted) return { reused: true };
      await during('remove interrupted clone', () => removeImage(io, clone.image));
    }
    await makeClone(deps, req);
    await faultPoint('restore:after-clone');
    return { reused: false };
  };
}

async function makeClone(deps: ActivityDeps, req: RestoreDiskRequest): Promise<void> {
  const { image, snap, clone, previous } = req.disk;
  const parentIo = await deps.ioctx(image.pool, image.namespace);
  const childIo = await deps.ioctx(clone.pool, clone.namespace);
  await during(`clone ${rbdSpec(image)}@${snap}`, () => cloneImage(parentIo, image.image, snap, childIo, clone.image));
  const img = await openImage(childIo, clone.image);
  try {
    // Ownership first: until it is written, a failed restore's cleanup could not tell the clone is ours.
    await img.setMetadata(RESTORE_META.workflowId, req.workflowId);
    // rbd_clone copied the image's own vmsnap keys (restore record, ownership): they describe the image, not this disk.
    for (const key of Object.keys(await img.listMetadata())) {
      if (key.startsWith('vmsnap.') && !key.startsWith('vmsnap.restore.')) await img.removeMetadata(key);
    }
    // The reaper acts only on its own namespace's, fleet's and host's leftovers (src/model/restore-leftovers.ts).
    for (const [k, v] of Object.entries(restoreScopeMetadata(deps.scope, deps.host))) await img.setMetadata(k, v);
    await img.setMetadata(RESTORE_META.from, `${rbdSpec(image)}@${snap}`);
    if (previous) await img.setMetadata(RESTORE_META.previous, rbdSpec(previous));
    if (req.throwaway) await img.setMetadata(RESTORE_META.throwaway, '1');
  } finally {
    await img.close();
  }
}

/** A restored disk's flatten, through the one guarded flatten (see cloneRestoreDisk), heartbeating. */
export function flattenRestoreDisk(deps: ActivityDeps) {
  return async function flattenRestoreDisk(req: RestoreDiskRequest): Promise<{ flattened: boolean }> {
    const ctx = Context.current();
    const { clone, target } = req.disk;
    await guardedFlatten(deps, {
      io: await deps.ioctx(clone.pool, clone.namespace),
      image: clone.image,
      startedKey: RESTORE_META.flattenStarted,
      remake: () => makeClone(deps, req),
      kind: 'restore',
      workflowId: req.workflowId,
      target,
      onProgress: (done, total) => ctx.heartbeat({ done, total }),
    });
    return { flattened: true };
  };
}

/** sha256 of the restored disk and of image@snap (before the VM starts): ContentMismatch if they differ. */
export function verifyRestoreDisk(deps: ActivityDeps) {
  return async function verifyRestoreDisk(req: RestoreDiskRequest): Promise<{ sha256: string }> {
    const { image, snap, clone } = req.disk;
    const srcIo = await deps.ioctx(image.pool, image.namespace);
    const dstIo = await deps.ioctx(clone.pool, clone.namespace);
    const src = await during('open image snapshot', () => openImage(srcIo, image.image, { snap, readOnly: true }));
    let dst: Image | undefined;
    try {
      dst = await during('open restored disk', () => openImage(dstIo, clone.image, { readOnly: true }));
      const [a, b] = await Promise.all([src.checksum(), dst.checksum()]);
      if (a !== b) {
        throw ApplicationFailure.nonRetryable(`${rbdSpec(clone)} differs from ${rbdSpec(image)}@${snap} (sha256 ${b} vs ${a})`, FailureType.ContentMismatch);
      }
      return { sha256: b };
    } finally {
      await src.close();
      await dst?.close();
    }
  };
}

/**
 * Removes the disks this restore made (by their ownership key); anything else is left alone. A
 * disk still used by a defined domain is refused by the caller's order (domain first).
 */
export async function removeRestoreDisks(deps: ActivityDeps, workflowId: string, disks: RestoreDiskPlan[]): Promise<string[]> {
  const removed: string[] = [];
  for (const { clone } of disks) {
    const io = await deps.ioctx(clone.pool, clone.namespace);
    if (!(await imageExists(io, clone.image))) continue;
    const img = await openImage(io, clone.image, { readOnly: true });
    let ours: boolean;
    try {
      ours = (await img.getMetadata(RESTORE_META.workflowId)) === workflowId;
    } finally {
      await img.close();
    }
    if (!ours) continue;
    await during(`remove ${rbdSpec(clone)}`, () => removeImage(io, clone.image));
    removed.push(rbdSpec(clone));
  }
  return removed;
}
