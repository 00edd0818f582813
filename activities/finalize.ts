import { ApplicationFailure } from '@temporalio/common';
import { openImage } from '../src/ceph';
import { FailureType } from '../src/model/failures';
import { IMAGE_SNAP } from '../src/model/naming';
import { META, snapDoneKey, snapOwnerKey } from '../src/model/types';
import type { RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { translating } from './failures';
import { removeSnapIfPresent } from './snapshots';

export interface FinalizeRequest {
  source: RbdLocation;
  snap: string;
  image?: RbdLocation;
  quiesced: boolean;
  verify?: boolean;
  /** The freeze the result comes from, recorded beside `quiesced` (see src/model/quiesce-record.ts). */
  frozenFilesystems?: number;
  frozenAt?: string;
  quiesceReason?: string;
}

/**
 * Image mode: the flattened image gets the protected snapshot `snap` (the layout Glance's RBD
 * store expects) and is marked complete; the temporary source snapshot is removed. Snapshot-only
 * mode: the source snapshot is kept and marked complete on the source image's metadata.
 */
export function finalizeDisk(deps: ActivityDeps) {
  return async function finalizeDisk(req: FinalizeRequest): Promise<{ bytes?: number; sha256?: string }> {
    if (!req.image) {
      const io = await deps.ioctx(req.source.pool, req.source.namespace);
      const src = await translating('open source image', () => openImage(io, req.source.image));
      try {
        await src.metadataSet(snapDoneKey(req.snap), JSON.stringify({ quiesced: req.quiesced, at: new Date().toISOString(), ...record(req) }));
      } finally {
        await src.close();
      }
      return {};
    }
    const io = await deps.ioctx(req.image.pool, req.image.namespace);
    const sha256 = req.verify ? await verifyContent(deps, req) : undefined;
    const img = await translating('open image', () => openImage(io, req.image!.image));
    let bytes: number;
    try {
      if (!(await img.snapExists(IMAGE_SNAP))) await translating('create image snapshot', () => img.createSnap(IMAGE_SNAP));
      if (!(await img.isSnapProtected(IMAGE_SNAP))) await translating('protect image snapshot', () => img.protectSnap(IMAGE_SNAP));
      await img.metadataSet(META.quiesced, String(req.quiesced));
      const r = record(req);
      if (r.frozenFilesystems !== undefined) await img.metadataSet(META.frozenFilesystems, String(r.frozenFilesystems));
      if (r.frozenAt) await img.metadataSet(META.frozenAt, r.frozenAt);
      if (r.reason) await img.metadataSet(META.quiesceReason, r.reason);
      await img.metadataSet(META.state, 'complete');
      bytes = (await img.stat()).size;
    } finally {
      await img.close();
    }
    await removeSourceSnap(deps, req.source, req.snap);
    return { bytes, ...(sha256 ? { sha256 } : {}) };
  };
}

function record(req: FinalizeRequest): { frozenFilesystems?: number; frozenAt?: string; reason?: string } {
  return {
    ...(req.frozenFilesystems !== undefined ? { frozenFilesystems: req.frozenFilesystems } : {}),
    ...(req.frozenAt ? { frozenAt: req.frozenAt } : {}),
    ...(req.quiesceReason ? { reason: req.quiesceReason } : {}),
  };
}

async function verifyContent(deps: ActivityDeps, req: FinalizeRequest): Promise<string> {
  const srcIo = await deps.ioctx(req.source.pool, req.source.namespace);
  const dstIo = await deps.ioctx(req.image!.pool, req.image!.namespace);
  const src = await translating('open source snapshot', () => openImage(srcIo, req.source.image, { snap: req.snap, readOnly: true }));
  const dst = await translating('open image', () => openImage(dstIo, req.image!.image, { readOnly: true }));
  try {
    const [a, b] = await Promise.all([src.checksum(), dst.checksum()]);
    if (a !== b) {
      throw ApplicationFailure.nonRetryable(
        `${req.image!.pool}/${req.image!.image} differs from ${req.source.pool}/${req.source.image}@${req.snap} (sha256 ${b} vs ${a})`,
        FailureType.ContentMismatch,
      );
    }
    return b;
  } finally {
    await src.close();
    await dst.close();
  }
}

/** Removes one of vmsnap's own source snapshots; a missing one is already gone. */
export async function removeSourceSnap(deps: ActivityDeps, source: RbdLocation, snap: string): Promise<boolean> {
  const io = await deps.ioctx(source.pool, source.namespace);
  const src = await translating('open source image', () => openImage(io, source.image));
  try {
    await src.metadataRemove(snapDoneKey(snap)).catch(() => undefined);
    const existed = await translating('remove source snapshot', () => removeSnapIfPresent(src, snap));
    // Last: while the owner key is there, the orphan reaper can still find a half-removed snapshot.
    await src.metadataRemove(snapOwnerKey(snap)).catch(() => undefined);
    return existed;
  } finally {
    await src.close();
  }
}
