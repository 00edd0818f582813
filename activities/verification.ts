import { ApplicationFailure } from '@temporalio/common';
import { openImage } from '../src/ceph';
import { FailureType } from '../src/model/failures';
import { VERIFY_META } from '../src/model/metadata-keys';
import { parseRbdSpec } from '../src/model/restore-plan';
import { imageSetsOf } from '../src/model/restore-point';
import { encodeVerification } from '../src/model/verification';
import type { Verification } from '../src/model/verification';
import { verificationDue } from '../src/model/verify-every';
import { poolCatalog } from './catalog';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

/** input.verifyEvery: is this run's set due for a verification (src/model/verify-every.ts)? */
export function verificationIsDue(deps: ActivityDeps) {
  return async function verificationIsDue(req: { imagePool: string; domain: string; workflowId: string; every: number; schedule?: string }): Promise<boolean> {
    const catalog = await poolCatalog(deps, req.imagePool);
    return verificationDue(imageSetsOf(req.domain, catalog), req.workflowId, req.every, req.schedule);
  };
}

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
    const catalog = await poolCatalog(deps, req.imagePool);
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
    deps.metrics.verifications.inc({ verdict: req.verification.verdict });
    if (req.verification.verdict === 'verified') deps.metrics.lastVerified.set({ domain: set.domain }, Math.floor(Date.parse(req.verification.at) / 1000));
    return { images: set.disks.map((d) => d.image) };
  };
}
