import { ApplicationFailure } from '@temporalio/common';
import { patched, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { parseSnapshotInput } from '../src/model/input';
import type { SnapshotInput, SnapshotRequest } from '../src/model/input';
import { IMAGE_SNAP, rbdUrl } from '../src/model/naming';
import { planSnapshot } from '../src/model/plan';
import { reusedQuiesce } from '../src/model/quiesce-record';
import type { FoundRecord } from '../src/model/quiesce-record';
import { SA } from '../src/model/search-attributes';
import type { DiskPlan, DiskResult, InspectResult, SnapshotPlan, SnapshotResult } from '../src/model/types';
import { cleanup, flattening, imageOps, inspection, prepareLocal } from './activity-profiles';
import { captureDisks } from './capture';
import type { Capture } from './capture';
import { Compensations } from './compensations';
import { acquireDomainLock } from './domain-lock';
import { Progress } from './progress';
import { applyRetentionPolicy } from './retention';
import { timed } from './timed';

/**
 * inspect → freeze → snapshot every disk → thaw → clone → flatten → finalize.
 *
 * The guest is frozen only around the snapshots; clone and flatten run after the thaw. Every
 * name derives from the workflow id, so re-running an id finishes or reuses earlier work.
 */
export async function consistentSnapshot(request: SnapshotRequest): Promise<SnapshotResult> {
  const parsed = parseSnapshotInput(request);
  if (!parsed.ok) throw ApplicationFailure.nonRetryable(`invalid input: ${parsed.message}`, FailureType.InvalidInput);
  const input = parsed.input;
  const { workflowId, runId } = workflowInfo();
  const steps: Record<string, number> = {};
  const progress = new Progress(input.domain);

  progress.phase('inspect');
  const found = await timed(steps, 'inspect', () =>
    inspection().inspectDomain.executeWithOptions({ summary: `inspect ${input.domain}` }, [
      {
        domain: input.domain,
        quiesce: input.quiesce,
        agentTimeoutSec: input.agentTimeoutSec,
        targetPool: input.target.clone ? input.target.pool : undefined,
      },
    ]),
  );
  const planned = planSnapshot(input, found, workflowId);
  if (!planned.ok) throw ApplicationFailure.nonRetryable(planned.message, planned.type);
  const plan = planned.plan;
  upsertSearchAttributes([
    { key: SA.domain, value: plan.domain.name },
    { key: SA.host, value: found.host },
  ]);

  progress.phase('lock');
  const lock = await timed(steps, 'lock', () => acquireDomainLock(plan.domain, { workflowId, runId }));
  try {
    const targets = await timed(steps, 'checkTargets', () =>
      inspection().checkTargets.executeWithOptions({ summary: 'check target names' }, [{ workflowId, disks: plan.disks }]),
    );
    if (targets.complete) return finish(await applyRetentionPolicy(input, plan, reused(plan, found, workflowId, steps, targets.records), progress));
    if (targets.staleImages.length || targets.staleSnaps.length) {
      await removeImages(workflowId, targets.staleImages);
      await cleanup().removeSourceSnaps.executeWithOptions({ summary: 'remove an earlier attempt’s snapshots' }, [
        { snaps: targets.staleSnaps.map((d) => ({ source: d.source, snap: d.sourceSnap })) },
      ]);
    }
    const result = await snapshotAndCopy(plan, input, found, steps, progress);
    return finish(await applyRetentionPolicy(input, plan, result, progress));
  } catch (err) {
    progress.phase('failed');
    upsertSearchAttributes([{ key: SA.result, value: 'failed' }]);
    throw err;
  } finally {
    await lock.release();
  }

  function finish(result: SnapshotResult): SnapshotResult {
    progress.phase('done');
    upsertSearchAttributes([
      { key: SA.quiesced, value: result.quiesced },
      { key: SA.result, value: 'succeeded' },
    ]);
    return result;
  }
}

async function snapshotAndCopy(
  plan: SnapshotPlan,
  input: SnapshotInput,
  found: InspectResult,
  steps: Record<string, number>,
  progress: Progress,
): Promise<SnapshotResult> {
  const { workflowId } = workflowInfo();
  const saga = new Compensations();
  try {
    // Histories recorded before this step replay without it.
    if (plan.freeze && patched('vmsnap-end-predecessor-freeze')) {
      const { runId } = workflowInfo();
      await prepareLocal().endPredecessorFreeze.executeWithOptions({ summary: 'end an earlier run’s freeze' }, [
        { workflowId, runId, domainUuid: plan.domain.uuid, domainName: plan.domain.name, agentTimeoutSec: input.agentTimeoutSec },
      ]);
    }
    const capture = await captureDisks(plan, input, saga, progress);
    Object.assign(steps, windowSteps(capture));
    upsertSearchAttributes([{ key: SA.quiesced, value: capture.quiesced }]);

    const imageDisks = plan.disks.filter((d) => d.image);
    if (imageDisks.length) saga.add('remove images', () => removeImages(workflowId, imageDisks));
    // allSettled: on a failure, compensation must not race a sibling disk's running flatten.
    const settled = await Promise.allSettled(plan.disks.map((d) => copyDisk(d, plan, input, capture, progress, steps)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const copies = settled.map((s) => (s as PromiseFulfilledResult<{ bytes?: number; sha256?: string } | undefined>).value);
    // Histories recorded before restore points existed replay without this step.
    if (imageDisks.length && patched('vmsnap-restore-point')) await recordRestorePoint(plan, capture.quiesced, imageDisks);
    return {
      workflowId,
      domain: plan.domain,
      host: found.host,
      quiesced: capture.quiesced,
      quiesceReason: capture.quiesceReason,
      frozenFilesystems: capture.frozenFilesystems,
      freezeWindowMs: capture.freeze && capture.thaw ? round(capture.thaw.returnedAt - capture.freeze.startedAt) : null,
      ...(capture.quiesced && capture.freeze ? { frozenAt: frozenAt(capture) } : {}),
      freezeBreakdownMs: breakdown(capture),
      disks: copies.map((c, i) => diskResult(plan.disks[i], found.fsid, c)),
      skippedDisks: plan.skipped,
      stepsMs: steps,
    };
  } catch (err) {
    progress.phase('compensate');
    await saga.run(err);
    throw err;
  }
}

async function copyDisk(
  d: DiskPlan,
  plan: SnapshotPlan,
  input: SnapshotInput,
  capture: Capture,
  progress: Progress,
  steps: Record<string, number>,
): Promise<{ bytes?: number; sha256?: string } | undefined> {
  const { workflowId } = workflowInfo();
  const record = {
    quiesced: capture.quiesced,
    frozenFilesystems: capture.frozenFilesystems,
    quiesceReason: capture.quiesceReason,
    ...(capture.quiesced && capture.freeze ? { frozenAt: frozenAt(capture) } : {}),
  };
  if (!d.image) {
    await imageOps().finalizeDisk.executeWithOptions({ summary: `keep snapshot of ${d.target}` }, [
      { source: d.source, snap: d.sourceSnap, ...record },
    ]);
    return undefined;
  }
  const req = {
    workflowId,
    domain: plan.domain.name,
    domainUuid: plan.domain.uuid,
    target: d.target,
    source: d.source,
    snap: d.sourceSnap,
    image: d.image,
    labels: input.labels,
  };
  progress.phase('clone');
  const cloned = await timed(steps, `clone:${d.target}`, () =>
    imageOps().cloneDisk.executeWithOptions({ summary: `clone ${d.target} → ${d.image!.pool}/${d.image!.image}` }, [req]),
  );
  // Finished by the run a Reset replaced (same freeze, same names): nothing left to copy.
  if (cloned.complete && patched('vmsnap-skip-finished-disk')) return undefined;
  progress.phase('flatten');
  await timed(steps, `flatten:${d.target}`, () =>
    flattening(input).flattenDisk.executeWithOptions({ summary: `flatten ${d.image!.image}` }, [req]),
  );
  progress.flattened(d.target);
  progress.phase('finalize');
  const fin = await timed(steps, `finalize:${d.target}`, () =>
    imageOps().finalizeDisk.executeWithOptions({ summary: `finalize ${d.image!.image}` }, [
      { source: d.source, snap: d.sourceSnap, image: d.image, ...record, verify: input.verify },
    ]),
  );
  return fin;
}

async function recordRestorePoint(plan: SnapshotPlan, quiesced: boolean, disks: DiskPlan[]): Promise<void> {
  const { workflowId, runId } = workflowInfo();
  await imageOps().recordRestorePoint.executeWithOptions({ summary: 'record restore point on the images' }, [
    { workflowId, runId, domain: plan.domain, quiesced, disks: disks.map((d) => ({ target: d.target, source: d.source, image: d.image! })) },
  ]);
}

async function removeImages(workflowId: string, disks: DiskPlan[]): Promise<void> {
  if (!disks.length) return;
  await cleanup().removeImages.executeWithOptions({ summary: 'remove partial images' }, [
    { workflowId, images: disks.map((d) => ({ image: d.image!, source: d.source, snap: d.sourceSnap })) },
  ]);
}

function diskResult(d: DiskPlan, fsid: string, copy: { bytes?: number; sha256?: string } | undefined): DiskResult {
  const snapshot = `${d.source.pool}/${d.source.image}@${d.sourceSnap}`;
  if (!d.image) {
    return { target: d.target, source: `${d.source.pool}/${d.source.image}`, location: rbdUrl(fsid, d.source.pool, d.source.image, d.sourceSnap, d.source.namespace), snapshot };
  }
  return {
    target: d.target,
    source: `${d.source.pool}/${d.source.image}`,
    location: rbdUrl(fsid, d.image.pool, d.image.image, IMAGE_SNAP, d.image.namespace),
    snapshot,
    image: `${d.image.pool}/${d.image.image}`,
    ...(copy?.bytes !== undefined ? { contentBytes: copy.bytes } : {}),
    ...(copy?.sha256 ? { sha256: copy.sha256 } : {}),
  };
}

function reused(
  plan: SnapshotPlan,
  found: InspectResult,
  workflowId: string,
  steps: Record<string, number>,
  records: FoundRecord[] | undefined,
): SnapshotResult {
  // What the images record; histories recorded before they recorded it replay the old answer.
  const q = patched('vmsnap-reuse-records')
    ? reusedQuiesce(records ?? [])
    : { quiesced: false, quiesceReason: 'an earlier run of this workflow id already produced these images; see that run for its quiesce state', frozenFilesystems: 0 };
  return {
    workflowId,
    domain: plan.domain,
    host: found.host,
    ...q,
    freezeWindowMs: null,
    disks: plan.disks.map((d) => diskResult(d, found.fsid, undefined)),
    skippedDisks: plan.skipped,
    stepsMs: steps,
    reusedExisting: true,
  };
}

/** The freeze's identity on the images: when its call started, worker clock. */
function frozenAt(c: Capture): string {
  return new Date(Math.round(c.freeze!.startedAt)).toISOString();
}

function windowSteps(c: Capture): Record<string, number> {
  const out: Record<string, number> = {};
  if (c.freeze) out.freeze = round(c.freeze.returnedAt - c.freeze.startedAt);
  out.snapshot = round(c.snapshot.returnedAt - c.snapshot.startedAt);
  if (c.thaw) out.thaw = round(c.thaw.returnedAt - c.thaw.startedAt);
  return out;
}

function breakdown(c: Capture): SnapshotResult['freezeBreakdownMs'] {
  if (!c.freeze || !c.thaw) return undefined;
  const freeze = c.freeze.returnedAt - c.freeze.startedAt;
  const snapshot = c.snapshot.returnedAt - c.snapshot.startedAt;
  const thaw = c.thaw.returnedAt - c.thaw.startedAt;
  const total = c.thaw.returnedAt - c.freeze.startedAt;
  return { freeze: round(freeze), snapshot: round(snapshot), thaw: round(thaw), gaps: round(total - freeze - snapshot - thaw) };
}


function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
