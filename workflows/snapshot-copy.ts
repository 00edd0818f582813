import { deprecatePatch, patched, upsertSearchAttributes } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { SA } from '../src/model/search-attributes';
import { quiesceRecord, snapshotResult, windowSteps } from '../src/model/snapshot-result';
import type { Capture, CopiedDisk } from '../src/model/snapshot-result';
import type { DiskPlan, FleetLimits, InspectResult, SnapshotPlan, SnapshotResult } from '../src/model/types';
import { FEWER_ROUND_TRIPS, cleanup, flattening, imageOps, keepOps, prepareLocal } from './activity-profiles';
import { captureDisks } from './capture';
import { mirrorToDrSite } from './dr-mirror';
import { failureType } from './failure-of';
import { Compensations } from './compensations';
import { takeTurns } from './limits';
import type { TurnWanted } from './limits';
import { locate } from './locate';
import type { RunContext } from './run-context';
import { acquireSlot } from './slots';
import type { HeldSlot } from './slots';
import { timed } from './timed';

/**
 * The fleet limits' turns, the freeze window (workflows/capture.ts), then every disk's copy in
 * parallel and the restore point. Every side effect has its undo registered first; on a failure
 * or cancel the undo runs (workflows/compensations.ts) and the failure goes on.
 */
export async function snapshotAndCopy(ctx: RunContext, plan: SnapshotPlan, found: InspectResult): Promise<SnapshotResult> {
  const { id, input, steps, progress } = ctx;
  const saga = new Compensations();
  try {
    // Fleet limits hold from before the freeze to after the thaw (never the copy).
    const slots = found.limits ? await timed(steps, 'slots', () => holdLimits(plan, found, found.limits!, id)) : [];
    let capture: Capture;
    let turnsReleased: Promise<unknown> = Promise.resolve();
    try {
      // Right before the window, in the workflow task that runs it: a Reset to the last task
      // before the window must find this step ahead of it, not already done. (Deprecated patch,
      // docs/versioning.md: no kept history predates this step.)
      if (plan.freeze) {
        deprecatePatch('vmsnap-end-predecessor-freeze');
        await prepareLocal().endPredecessorFreeze.executeWithOptions({ summary: 'end an earlier run’s freeze' }, [
          { workflowId: id.workflowId, runId: id.runId, domainUuid: plan.domain.uuid, domainName: plan.domain.name, agentTimeoutSec: input.agentTimeoutSec },
        ]);
      }
      capture = await captureDisks(ctx, plan, saga);
    } finally {
      // Since FEWER_ROUND_TRIPS all at once and not waited for here: the copies start in the same
      // workflow task (a turn's release never fails: a limit that is not running holds nothing of
      // ours). Before it, one after the other, each waited for.
      if (patched(FEWER_ROUND_TRIPS)) turnsReleased = Promise.all(slots.map((s) => s.release()));
      else for (const s of slots.reverse()) await s.release();
    }
    Object.assign(steps, windowSteps(capture));
    upsertSearchAttributes([{ key: SA.quiesced, value: capture.quiesced }]);
    const mirror = await mirrorToDrSite(ctx, plan, capture);

    const imageDisks = plan.disks.filter((d) => d.image);
    if (imageDisks.length) saga.add('remove images', () => removeImages(id.nameId, imageDisks));
    // allSettled: on a failure, compensation must not race a sibling disk's running flatten.
    const settled = await Promise.allSettled(plan.disks.map((d) => copyDisk(ctx, d, plan, capture)));
    await turnsReleased;
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const copies = settled.map((s) => (s as PromiseFulfilledResult<CopiedDisk | undefined>).value);
    // Deprecated patch (docs/versioning.md): no kept history predates restore points.
    if (imageDisks.length) {
      deprecatePatch('vmsnap-restore-point');
      await recordRestorePoint(ctx, plan, capture.quiesced, imageDisks);
    }
    const result = snapshotResult({ workflowId: id.nameId, plan, found, steps }, capture, copies);
    return mirror ? { ...result, mirror } : result;
  } catch (err) {
    progress.phase('compensate');
    await saga.run(err);
    throw err;
  }
}

/** clone → flatten → finalize of one disk (or only its snapshot kept, without a target image). */
async function copyDisk(ctx: RunContext, d: DiskPlan, plan: SnapshotPlan, capture: Capture): Promise<CopiedDisk | undefined> {
  const { id, input, steps, progress } = ctx;
  const record = quiesceRecord(capture);
  if (!d.image) {
    // Timed like an image's finalize: its owner-record writes are work, not orchestration.
    await timed(steps, `finalize:${d.target}`, () =>
      keepOps().finalizeDisk.executeWithOptions({ summary: `keep snapshot of ${d.target}` }, [{ source: d.source, snap: d.sourceSnap, ...record }]),
    );
    return undefined;
  }
  const req = {
    workflowId: id.nameId,
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
  if (cloned.complete) {
    deprecatePatch('vmsnap-skip-finished-disk');
    return undefined;
  }
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

async function recordRestorePoint(ctx: RunContext, plan: SnapshotPlan, quiesced: boolean, disks: DiskPlan[]): Promise<void> {
  const req = { workflowId: ctx.id.nameId, runId: ctx.id.runId, domain: plan.domain, quiesced, disks: disks.map((d) => ({ target: d.target, source: d.source, image: d.image! })) };
  try {
    await imageOps().recordRestorePoint.executeWithOptions({ summary: 'record restore point on the images' }, [req]);
  } catch (err) {
    // The restore point reads the domain's definition, so it needs the libvirtd the VM is on: a
    // VM that migrated during the copy has its definition on its new host. The images are fine.
    const type = failureType(err);
    if (type !== FailureType.DomainNotFound && type !== FailureType.DomainNotRunning) throw err;
    deprecatePatch('vmsnap-restore-point-follows-vm');
    const at = await locate(plan.domain.uuid, { relook: true });
    if (!at.ok) throw err;
    await imageOps(at.taskQueue).recordRestorePoint.executeWithOptions({ summary: `record restore point (${plan.domain.name} now on ${at.host})` }, [req]);
  }
}

export async function removeImages(nameId: string, disks: DiskPlan[]): Promise<void> {
  if (!disks.length) return;
  await cleanup().removeImages.executeWithOptions({ summary: 'remove partial images' }, [
    { workflowId: nameId, images: disks.map((d) => ({ image: d.image!, source: d.source, snap: d.sourceSnap })) },
  ]);
}

/**
 * A freeze-window turn of this host (when the run freezes), then a snapshot turn of the cluster:
 * the fleet limits' FIFO queues (workflows/limits.ts), without polling. Histories from before
 * them took polled slots (workflows/slots.ts; retire both 2027-03-01, when no run begun before
 * 2026-12-06 is open: runs end within their own timeouts). Older still: no limits at all.
 */
async function holdLimits(plan: SnapshotPlan, found: InspectResult, limits: FleetLimits, id: RunContext['id']): Promise<{ waitedMs: number; release(): Promise<void> }[]> {
  if (patched(FIFO_LIMITS)) {
    const wanted: TurnWanted[] = [];
    if (plan.freeze) wanted.push({ kind: 'window', scope: found.host, n: limits.windowsPerHost, label: `freeze window on ${found.host}` });
    wanted.push({ kind: 'snap', scope: found.fsid, n: limits.snapshotsPerCluster, label: `snapshot on cluster ${found.fsid}` });
    // The lease only says how soon a closed holder (a Reset's replaced run, a terminated one) is
    // noticed; a live one keeps its turn. Most windows end within it unasked.
    return takeTurns(wanted, { maxWaitMs: 600_000, leaseMs: 10_000 });
  }
  // Histories from between the polled slots and the FIFO queues; none older is kept (deprecated patch).
  deprecatePatch('vmsnap-fleet-limits');
  return holdSlots(plan, found, limits, { workflowId: id.workflowId, runId: id.runId });
}

const FIFO_LIMITS = 'vmsnap-fifo-limits';

async function holdSlots(plan: SnapshotPlan, found: InspectResult, limits: FleetLimits, holder: { workflowId: string; runId: string }): Promise<HeldSlot[]> {
  const held: HeldSlot[] = [];
  try {
    if (plan.freeze) held.push(await acquireSlot('window', found.host, limits.windowsPerHost, holder, { maxWaitMs: 600_000, label: `freeze window on ${found.host}` }));
    held.push(await acquireSlot('snap', found.fsid, limits.snapshotsPerCluster, holder, { maxWaitMs: 600_000, label: `snapshot on cluster ${found.fsid}` }));
  } catch (err) {
    for (const s of held) await s.release();
    throw err;
  }
  return held;
}
