import { ApplicationFailure } from '@temporalio/common';
import { deprecatePatch, patched, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { parseSnapshotInput } from '../src/model/input';
import type { SnapshotInput, SnapshotRequest } from '../src/model/input';
import { planSnapshot } from '../src/model/plan';
import { reusedQuiesce } from '../src/model/quiesce-record';
import type { FoundRecord } from '../src/model/quiesce-record';
import { SA } from '../src/model/search-attributes';
import { quiesceRecord, reusedResult, snapshotResult, windowSteps } from '../src/model/snapshot-result';
import type { Capture, CopiedDisk } from '../src/model/snapshot-result';
import type { DiskPlan, FleetLimits, InspectResult, SnapshotPlan, SnapshotResult } from '../src/model/types';
import { acquireSlot } from './slots';
import { takeTurns } from './limits';
import type { TurnWanted } from './limits';
import type { HeldSlot } from './slots';
import { cleanup, flattening, imageOps, inspection, prepareLocal } from './activity-profiles';
import { captureDisks, failureType } from './capture';
import { locate } from './locate';
import { Compensations } from './compensations';
import { acquireDomainLock } from './domain-lock';
import { nameIdOf } from './name-id';
import { Progress } from './progress';
import { applyRetentionPolicy } from './retention';
import { timed } from './timed';
import { routeSnapshot } from './fleet-route';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import { verifyIfDue } from './verify-every';

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
  const info = workflowInfo();
  // Started by name on the fleet queue: find the VM's host and run there (workflows/fleet-route.ts).
  if (info.taskQueue === FLEET_TASK_QUEUE) return routeSnapshot(input, request);
  const { runId } = info;
  // Every name (snapshots, images, owner records) derives from this id: the router's, for a run
  // it started, so a run that follows its VM to another host keeps one set of names.
  const workflowId = nameIdOf(input);
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
  // Histories recorded before names were readable replay with the hashed names they used.
  const readable = patched('vmsnap-readable-names');
  const planned = planSnapshot(input, found, workflowId, readable ? 'readable' : 'hashed');
  if (!planned.ok) throw ApplicationFailure.nonRetryable(planned.message, planned.type);
  let plan = planned.plan;
  // A new run of an id whose earlier run used hashed names must find (and reuse or clean up) them.
  const hashed = readable ? planSnapshot(input, found, workflowId, 'hashed') : undefined;
  const legacy = hashed?.ok && hashed.plan.runKey !== plan.runKey ? hashed.plan : undefined;
  upsertSearchAttributes([
    { key: SA.domain, value: plan.domain.name },
    { key: SA.host, value: found.host },
  ]);

  const result = await underLock();
  // After the lock is released: a verify copy boots for minutes and never needs the VM held.
  return input.routedBy ? result : verifyIfDue(input, result, progress);

  async function underLock(): Promise<SnapshotResult> {
    progress.phase('lock');
    const lock = await timed(steps, 'lock', () => acquireDomainLock(plan.domain, { workflowId: info.workflowId, runId }));
    try {
      const targets = await timed(steps, 'checkTargets', () =>
        inspection().checkTargets.executeWithOptions({ summary: 'check target names' }, [
          { workflowId, disks: plan.disks, ...(legacy ? { legacyDisks: legacy.disks } : {}) },
        ]),
      );
      if (targets.legacyNames && legacy) plan = legacy;
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
  const workflowId = nameIdOf(input);
  const saga = new Compensations();
  try {
    // Fleet limits hold from before the freeze to after the thaw (never the copy).
    const slots = found.limits ? await timed(steps, 'slots', () => holdLimits(plan, found, found.limits!)) : [];
    let capture: Capture;
    try {
      // Right before the window, in the workflow task that runs it: a Reset to the last task
      // before the window must find this step ahead of it, not already done. (Deprecated patch,
      // docs/versioning.md: no kept history predates this step.)
      if (plan.freeze) {
        deprecatePatch('vmsnap-end-predecessor-freeze');
        const { runId, workflowId: ownId } = workflowInfo();
        await prepareLocal().endPredecessorFreeze.executeWithOptions({ summary: 'end an earlier run’s freeze' }, [
          { workflowId: ownId, runId, domainUuid: plan.domain.uuid, domainName: plan.domain.name, agentTimeoutSec: input.agentTimeoutSec },
        ]);
      }
      capture = await captureDisks(plan, input, saga, progress);
    } finally {
      for (const s of slots.reverse()) await s.release();
    }
    Object.assign(steps, windowSteps(capture));
    upsertSearchAttributes([{ key: SA.quiesced, value: capture.quiesced }]);

    const imageDisks = plan.disks.filter((d) => d.image);
    if (imageDisks.length) saga.add('remove images', () => removeImages(workflowId, imageDisks));
    // allSettled: on a failure, compensation must not race a sibling disk's running flatten.
    const settled = await Promise.allSettled(plan.disks.map((d) => copyDisk(d, plan, input, capture, progress, steps)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const copies = settled.map((s) => (s as PromiseFulfilledResult<CopiedDisk | undefined>).value);
    // Deprecated patch (docs/versioning.md): no kept history predates restore points.
    if (imageDisks.length) {
      deprecatePatch('vmsnap-restore-point');
      await recordRestorePoint(workflowId, plan, capture.quiesced, imageDisks);
    }
    return snapshotResult({ workflowId, plan, found, steps }, capture, copies);
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
): Promise<CopiedDisk | undefined> {
  const workflowId = nameIdOf(input);
  const record = quiesceRecord(capture);
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

async function recordRestorePoint(workflowId: string, plan: SnapshotPlan, quiesced: boolean, disks: DiskPlan[]): Promise<void> {
  const { runId } = workflowInfo();
  const req = { workflowId, runId, domain: plan.domain, quiesced, disks: disks.map((d) => ({ target: d.target, source: d.source, image: d.image! })) };
  try {
    await imageOps().recordRestorePoint.executeWithOptions({ summary: 'record restore point on the images' }, [req]);
  } catch (err) {
    // The restore point reads the domain's definition, so it needs the libvirtd the VM is on: a
    // VM that migrated during the copy has its definition on its new host. The images are fine.
    const type = failureType(err);
    if ((type !== FailureType.DomainNotFound && type !== FailureType.DomainNotRunning) || !patched('vmsnap-restore-point-follows-vm')) throw err;
    const at = await locate(plan.domain.uuid, { relook: true });
    if (!at.ok) throw err;
    await imageOps(at.taskQueue).recordRestorePoint.executeWithOptions({ summary: `record restore point (${plan.domain.name} now on ${at.host})` }, [req]);
  }
}

async function removeImages(workflowId: string, disks: DiskPlan[]): Promise<void> {
  if (!disks.length) return;
  await cleanup().removeImages.executeWithOptions({ summary: 'remove partial images' }, [
    { workflowId, images: disks.map((d) => ({ image: d.image!, source: d.source, snap: d.sourceSnap })) },
  ]);
}

function reused(
  plan: SnapshotPlan,
  found: InspectResult,
  workflowId: string,
  steps: Record<string, number>,
  records: FoundRecord[] | undefined,
): SnapshotResult {
  // What the images record. (Deprecated patch, docs/versioning.md: no kept history predates it.)
  deprecatePatch('vmsnap-reuse-records');
  return reusedResult({ workflowId, plan, found, steps }, reusedQuiesce(records ?? []));
}

/** A freeze-window slot of this host (when the run freezes), then a snapshot slot of the cluster. */
/**
 * The fleet limits' turns (workflows/limits.ts), FIFO and without polling. Histories from before
 * them took polled slots (workflows/slots.ts; retire both 2027-03-01, when no run begun before
 * 2026-12-06 is open: runs end within their own timeouts). Older still: no limits at all.
 */
async function holdLimits(plan: SnapshotPlan, found: InspectResult, limits: FleetLimits): Promise<{ waitedMs: number; release(): Promise<void> }[]> {
  if (patched(FIFO_LIMITS)) {
    const wanted: TurnWanted[] = [];
    if (plan.freeze) wanted.push({ kind: 'window', scope: found.host, n: limits.windowsPerHost, label: `freeze window on ${found.host}` });
    wanted.push({ kind: 'snap', scope: found.fsid, n: limits.snapshotsPerCluster, label: `snapshot on cluster ${found.fsid}` });
    // The lease only says how soon a closed holder (a Reset's replaced run, a terminated one) is
    // noticed; a live one keeps its turn. Most windows end within it unasked.
    return takeTurns(wanted, { maxWaitMs: 600_000, leaseMs: 10_000 });
  }
  if (!patched('vmsnap-fleet-limits')) return [];
  return holdSlots(plan, found, limits);
}

const FIFO_LIMITS = 'vmsnap-fifo-limits';

async function holdSlots(plan: SnapshotPlan, found: InspectResult, limits: FleetLimits): Promise<HeldSlot[]> {
  const { workflowId, runId } = workflowInfo();
  const holder = { workflowId, runId };
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
