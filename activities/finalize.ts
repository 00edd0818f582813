import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { openImage } from '../src/ceph';
import { FailureType } from '../src/model/failures';
import { IMAGE_SNAP } from '../src/model/naming';
import { META } from '../src/model/types';
import type { RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';
import { readOwner, recordOwner, removeSourceSnaps } from '../src/host/source-snaps';

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
 * mode: the source snapshot is kept and marked complete in its owner record.
 */
export function finalizeDisk(deps: ActivityDeps) {
  return async function finalizeDisk(req: FinalizeRequest): Promise<{ bytes?: number; sha256?: string }> {
    if (!req.image) {
      // The kept snapshot's record says so (not image metadata: that write goes through the VM's QEMU).
      const rec = await readOwner(deps, req.source, req.snap);
      await recordOwner(deps, req.source, req.snap, {
        workflowId: rec?.workflowId ?? Context.current().info.workflowExecution?.workflowId ?? '', // prepare wrote it; a record lost since is rewritten
        ...deps.scope,
        ...(rec?.domainUuid ? { domainUuid: rec.domainUuid } : {}),
        recordedAt: rec?.recordedAt ?? new Date().toISOString(),
        state: 'kept',
        quiesced: req.quiesced,
        ...record(req),
      });
      return {};
    }
    const io = await deps.ioctx(req.image.pool, req.image.namespace);
    const sha256 = req.verify ? await verifyContent(deps, req) : undefined;
    const img = await during('open image', () => openImage(io, req.image!.image));
    let bytes: number;
    try {
      if (!(await img.snapExists(IMAGE_SNAP))) await during('create image snapshot', () => img.createSnap(IMAGE_SNAP));
      if (!(await img.isSnapProtected(IMAGE_SNAP))) await during('protect image snapshot', () => img.protectSnap(IMAGE_SNAP));
      await img.setMetadata(META.quiesced, String(req.quiesced));
      const r = record(req);
      if (r.frozenFilesystems !== undefined) await img.setMetadata(META.frozenFilesystems, String(r.frozenFilesystems));
      if (r.frozenAt) await img.setMetadata(META.frozenAt, r.frozenAt);
      if (r.reason) await img.setMetadata(META.quiesceReason, r.reason);
      await img.setMetadata(META.state, 'complete');
      bytes = (await img.stat()).size;
    } finally {
      await img.close();
    }
    await removeSourceSnaps(deps, [{ source: req.source, snap: req.snap }], { lateMayLand: false });
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
  const src = await during('open source snapshot', () => openImage(srcIo, req.source.image, { snap: req.snap, readOnly: true }));
  const dst = await during('open image', () => openImage(dstIo, req.image!.image, { readOnly: true }));
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
