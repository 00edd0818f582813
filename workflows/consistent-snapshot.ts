import { ApplicationFailure } from '@temporalio/common';
import { deprecatePatch, upsertSearchAttributes } from '@temporalio/workflow';
import { parseSnapshotInput } from '../src/model/input';
import type { SnapshotRequest } from '../src/model/input';
import { planSnapshot } from '../src/model/plan';
import { reusedQuiesce } from '../src/model/quiesce-record';
import type { FoundRecord } from '../src/model/quiesce-record';
import { SA } from '../src/model/search-attributes';
import { reusedResult } from '../src/model/snapshot-result';
import type { InspectResult, SnapshotPlan, SnapshotResult } from '../src/model/types';
import { cleanup, inspection } from './activity-profiles';
import { acquireDomainLock } from './domain-lock';
import { applyRetentionPolicy } from './retention';
import { checkedInput } from './checked-input';
import { runContext } from './run-context';
import type { RunContext } from './run-context';
import { removeImages, snapshotAndCopy } from './snapshot-copy';
import { timed } from './timed';
import { verifyIfDue } from './verify-every';

/**
 * inspect → freeze → snapshot every disk → thaw → clone → flatten → finalize, on the VM's host.
 *
 * This is `consistentSnapshot` as a host's queue runs it (workflows/index.ts); on the fleet queue
 * the same type is the router (workflows/fleet.ts), which starts this as its child. The guest is
 * frozen only around the snapshots; clone and flatten run after the thaw. Every name derives from
 * the run's name id, so re-running an id finishes or reuses earlier work.
 */
export async function consistentSnapshot(request: SnapshotRequest): Promise<SnapshotResult> {
  const ctx = runContext(checkedInput(parseSnapshotInput(request)));
  const { input, steps, progress } = ctx;

  progress.phase('inspect');
  const found = await timed(steps, 'inspect', () =>
    inspection().inspectDomain.executeWithOptions({ summary: `inspect ${input.domain}` }, [
      {
        domain: input.domain,
        quiesce: input.quiesce,
        agentTimeoutSec: input.agentTimeoutSec,
        targetPool: input.target.clone ? input.target.pool : undefined,
        ...(input.target.mirror ? { mirror: input.disks ? { disks: input.disks } : {} } : {}),
      },
    ]),
  );
  // (Deprecated patch, docs/versioning.md: names were hashed before it.)
  deprecatePatch('vmsnap-readable-names');
  const planned = planSnapshot(input, found, ctx.id.nameId, 'readable');
  if (!planned.ok) throw ApplicationFailure.nonRetryable(planned.message, planned.type);
  // A new run of an id whose earlier run used hashed names must find (and reuse or clean up) them.
  const hashed = planSnapshot(input, found, ctx.id.nameId, 'hashed');
  const legacy = hashed.ok && hashed.plan.runKey !== planned.plan.runKey ? hashed.plan : undefined;
  upsertSearchAttributes([
    { key: SA.domain, value: planned.plan.domain.name },
    { key: SA.host, value: found.host },
  ]);

  const result = await underLock(ctx, planned.plan, found, legacy);
  // After the lock is released: a verify copy boots for minutes and never needs the VM held.
  return input.routedBy ? result : verifyIfDue(input, result, progress);
}

/** Everything that needs the VM to itself: the domain lock is held from the first check to the result. */
async function underLock(ctx: RunContext, planned: SnapshotPlan, found: InspectResult, legacy: SnapshotPlan | undefined): Promise<SnapshotResult> {
  const { id, input, steps, progress } = ctx;
  let plan = planned;
  progress.phase('lock');
  const lock = await timed(steps, 'lock', () => acquireDomainLock(plan.domain, { workflowId: id.workflowId, runId: id.runId }));
  try {
    const targets = await timed(steps, 'checkTargets', () =>
      inspection().checkTargets.executeWithOptions({ summary: 'check target names' }, [
        { workflowId: id.nameId, disks: plan.disks, ...(legacy ? { legacyDisks: legacy.disks } : {}) },
      ]),
    );
    if (targets.legacyNames && legacy) plan = legacy;
    if (targets.complete) return finish(ctx, await applyRetentionPolicy(input, plan, reused(ctx, plan, found, targets.records), progress));
    if (targets.staleImages.length || targets.staleSnaps.length) {
      await removeImages(id.nameId, targets.staleImages);
      await cleanup().removeSourceSnaps.executeWithOptions({ summary: 'remove an earlier attempt’s snapshots' }, [
        { snaps: targets.staleSnaps.map((d) => ({ source: d.source, snap: d.sourceSnap })) },
      ]);
    }
    const result = await snapshotAndCopy(ctx, plan, found);
    return finish(ctx, await applyRetentionPolicy(input, plan, result, progress));
  } catch (err) {
    progress.phase('failed');
    upsertSearchAttributes([{ key: SA.result, value: 'failed' }]);
    throw err;
  } finally {
    await lock.release();
  }
}

function finish(ctx: RunContext, result: SnapshotResult): SnapshotResult {
  ctx.progress.phase('done');
  upsertSearchAttributes([
    { key: SA.quiesced, value: result.quiesced },
    { key: SA.result, value: 'succeeded' },
  ]);
  return result;
}

/** An earlier run of this name id finished: its images, with what they record of their freeze. */
function reused(ctx: RunContext, plan: SnapshotPlan, found: InspectResult, records: FoundRecord[] | undefined): SnapshotResult {
  // (Deprecated patch, docs/versioning.md: no kept history predates it.)
  deprecatePatch('vmsnap-reuse-records');
  return reusedResult({ workflowId: ctx.id.nameId, plan, found, steps: ctx.steps }, reusedQuiesce(records ?? []));
}
