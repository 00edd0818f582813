import { ApplicationFailure } from '@temporalio/common';
import { openImage } from '../src/ceph';
import { FailureType } from '../src/model/failures';
import { VERIFY_META } from '../src/model/metadata-keys';
import { parseRbdSpec } from '../src/model/restore-plan';
import { imageSetsOf } from '../src/model/restore-point';
import { encodeVerification } from '../src/model/verification';
import type { Verification } from '../src/model/verification';
import { readCatalog } from '../src/restore/catalog';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

export interface RecordVerificationRequest {
  imagePool: string;
  /** The VM (UUID) the set was taken of. */
  domain: string;
  fromWorkflowId: string;
  verification: Verification;
}

/**
 * Writes the verdict on every image of the set (VERIFY_META), where `vmsnap list` and retention
 * read it. A set removed meanwhile (retention) has nowhere to keep it: RestorePointNotFound.
 */
export function recordVerification(deps: ActivityDeps) {
  return async function recordVerification(req: RecordVerificationRequest): Promise<{ images: string[] }> {
    const io = await during(`open pool ${req.imagePool}`, () => deps.ioctx(req.imagePool));
    const catalog = await during(`list images in ${req.imagePool}`, () => readCatalog(io));
    const set = imageSetsOf(req.domain, catalog).find((s) => s.workflowId === req.fromWorkflowId);
    if (!set) throw ApplicationFailure.nonRetryable(`the image set of run ${req.fromWorkflowId} is gone: the verdict is not recorded`, FailureType.RestorePointNotFound);
    const value = encodeVerification(req.verification);
    for (const d of set.disks) {
      const loc = parseRbdSpec(d.image);
      const dio = await deps.ioctx(loc.pool, loc.namespace);
      const img = await during(`open ${d.image}`, () => openImage(dio, loc.image));
      try {
        await during(`record the verdict on ${d.image}`, () => img.setMetadata(VERIFY_META, value));
      } finally {
        await img.close();
      }
    }
    return { images: set.disks.map((d) => d.image) };
  };
}
