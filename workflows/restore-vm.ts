import { ApplicationFailure } from '@temporalio/common';
import { patched, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { parseRestoreInput } from '../src/model/restore-input';
import type { RestoreInput, RestoreRequest } from '../src/model/restore-input';
import { rbdSpec } from '../src/model/restore-plan';
import type { RestoreDiskPlan, RestorePlan, RestoreResult } from '../src/model/restore-point';
import { SA } from '../src/model/search-attributes';
import { checkedInput } from './checked-input';
import { Compensations } from './compensations';
import { acquireDomainLock } from './domain-lock';
import type { HeldLock } from './domain-lock';
import { nameIdOf } from './name-id';
import { Progress } from './progress';
import { restoreCopies, restoreDomainOps, restorePlanning, restoreUndo, restoreWaits } from './activity-profiles';
import { timed } from './timed';

/**
 * plan → (stop) → clone every disk (→ flatten) (→ verify) → define → start → agent answers
 * (→ check → discard, for a throw-away copy).
 *
 * The undo is registered before the first side effect and runs, non-cancellable, on any failure
 * or cancel: the VM gets its definition, disks and power state back; what the restore made goes.
 * Every name derives from the workflow id, so re-running an id reuses or finishes earlier work.
 */
export async function restoreVm(request: RestoreRequest): Promise<RestoreResult> {
  return restoreHere(checkedInput(parseRestoreInput(request)));
}

/**
 * The restore on this worker's host. Started here by the fleet queue's restoreVm (the router,
 * workflows/fleet.ts) as its child, or directly on a host's queue (`--host`); histories from
 * before the router ran it on the fleet queue itself.
 */
export async function restoreHere(input: RestoreInput): Promise<RestoreResult> {
  const info = workflowInfo();
  const rc: RestoreContext = { workflowId: nameIdOf(input), input, steps: {}, progress: new Progress(input.as ?? input.domain) };
  const { workflowId, steps, progress } = rc;

  progress.phase('plan');
  const planOnce = () =>
    restorePlanning().planRestore.executeWithOptions({ summary: `plan restore of ${input.domain} from ${input.from}` }, [{ workflowId, input }]);
  let plan = await timed(steps, 'plan', planOnce);
  upsertSearchAttributes([{ key: SA.domain, value: plan.domain.name }]);
  if (plan.alreadyRestored) return finish(rc, plan, [], true);

  // In place, the VM is held as a snapshot run holds it: a snapshot cannot copy a disk being
  // replaced (and become "latest"), nor can two restores race. Planned again under the lock, so
  // the state it acts on is the state while nobody else may act.
  let lock: HeldLock | undefined;
  if (plan.mode === 'in-place' && patched(LOCKED)) {
    progress.phase('lock');
    lock = await timed(steps, 'lock', () => acquireDomainLock(plan.domain, { workflowId: info.workflowId, runId: info.runId }));
    try {
      const again = await timed(steps, 'plan', planOnce);
      if (again.domain.uuid !== plan.domain.uuid) throw ApplicationFailure.nonRetryable(`${plan.domain.name} changed while the lock was taken`, FailureType.DomainMoved);
      plan = again;
    } catch (err) {
      await lock.release();
      throw err;
    }
    if (plan.alreadyRestored) {
      await lock.release();
      return finish(rc, plan, [], true);
    }
  }
  try {
    return await restoreHeld(rc, plan);
  } finally {
    await lock?.release();
  }
}

/** What every step of a restore reads: its name id, its input, its step timings and progress. */
interface RestoreContext {
  workflowId: string;
  input: RestoreInput;
  steps: Record<string, number>;
  progress: Progress;
}

/** (stop) → copy every disk → define → start → agent answers, with the undo registered first. */
async function restoreHeld(rc: RestoreContext, plan: RestorePlan): Promise<RestoreResult> {
  const { workflowId, input, steps, progress } = rc;
  const saga = new Compensations();
  saga.add('undo restore', async () => {
    await restoreUndo().undoRestore.executeWithOptions({ summary: `undo restore of ${plan.domain.name}` }, [{ workflowId, plan }]);
  });
  try {
    if (plan.mode === 'in-place' && plan.wasRunning) {
      progress.phase('stop');
      await timed(steps, 'stop', () =>
        restoreWaits(input.shutdownTimeoutMs).stopDomain.executeWithOptions({ summary: `shut down ${plan.domain.name}` }, [
          { workflowId, plan, timeoutMs: input.shutdownTimeoutMs },
        ]),
      );
    }
    const settled = await Promise.allSettled(plan.disks.map((d) => copyDisk(rc, d)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const sums = settled.map((s) => (s as PromiseFulfilledResult<string | undefined>).value);
    await bringUp(rc, plan);
    if (input.throwaway) return await discard(rc, plan, sums, input.throwaway);
    return finish(rc, plan, sums, false);
  } catch (err) {
    progress.phase('compensate');
    await saga.run(err);
    progress.phase('failed');
    upsertSearchAttributes([{ key: SA.result, value: 'failed' }]);
    throw err;
  }
}

/** define → start → the guest agent answers. */
async function bringUp({ workflowId, input, steps, progress }: RestoreContext, plan: RestorePlan): Promise<void> {
  progress.phase('define');
  await timed(steps, 'define', () =>
    restoreDomainOps().defineRestoredDomain.executeWithOptions(
      { summary: plan.mode === 'as' ? `define ${plan.domain.name}` : `swap disks of ${plan.domain.name}` },
      [{ workflowId, plan }],
    ),
  );
  progress.phase('start');
  await timed(steps, 'start', () =>
    restoreDomainOps().startRestoredDomain.executeWithOptions({ summary: `start ${plan.domain.name}` }, [{ workflowId, plan }]),
  );
  progress.phase('ready');
  await timed(steps, 'ready', () =>
    restoreWaits(input.readyTimeoutMs).waitGuestReady.executeWithOptions({ summary: `wait for ${plan.domain.name}'s agent` }, [
      { workflowId, plan, timeoutMs: input.readyTimeoutMs },
    ]),
  );
}

/**
 * A throw-away copy (vmsnap verify): its check, then everything the restore made goes, through
 * the same undo a failed restore runs. A failing check is an outcome, returned.
 */
async function discard(rc: RestoreContext, p: RestorePlan, sums: (string | undefined)[], t: NonNullable<RestoreInput['throwaway']>): Promise<RestoreResult> {
  const { workflowId, steps, progress } = rc;
  const argv = t.check;
  if (argv) progress.phase('check');
  const check = argv
    ? await timed(steps, 'check', () =>
        restoreWaits(t.checkTimeoutMs).runGuestCheck.executeWithOptions({ summary: `check ${argv.join(' ')} in ${p.domain.name}` }, [
          { workflowId, plan: p, argv, timeoutMs: t.checkTimeoutMs },
        ]),
      )
    : undefined;
  progress.phase('discard');
  await timed(steps, 'discard', () =>
    restoreUndo().undoRestore.executeWithOptions({ summary: `remove the copy ${p.domain.name}` }, [{ workflowId, plan: p }]),
  );
  return { ...finish(rc, p, sums, false), ...(check ? { check } : {}), discarded: true };
}

function finish({ workflowId, input, steps, progress }: RestoreContext, p: RestorePlan, sums: (string | undefined)[], reused: boolean): RestoreResult {
  progress.phase('done');
  upsertSearchAttributes([{ key: SA.result, value: 'succeeded' }]);
  return {
    workflowId,
    mode: p.mode,
    domain: p.domain,
    from: { workflowId: p.fromWorkflowId, quiesced: p.quiesced, takenAt: p.takenAt },
    disks: p.disks.map((d, i) => ({
      target: d.target,
      disk: rbdSpec(d.clone),
      from: `${rbdSpec(d.image)}@${d.snap}`,
      ...(d.previous ? { previous: rbdSpec(d.previous) } : {}),
      flattened: input.flatten,
      ...(sums[i] ? { sha256: sums[i] } : {}),
    })),
    kept: p.disks.flatMap((d) => (d.previous ? [rbdSpec(d.previous)] : [])),
    ...(reused ? { reusedExisting: true } : {}),
    stepsMs: steps,
  };
}

/** clone (→ flatten) (→ verify) of one disk; its sha256 when verified. */
async function copyDisk({ workflowId, input, steps, progress }: RestoreContext, d: RestoreDiskPlan): Promise<string | undefined> {
  const req = { workflowId, disk: d, ...(input.throwaway ? { throwaway: true } : {}) };
  progress.phase('clone');
  await timed(steps, `clone:${d.target}`, () =>
    restoreCopies(input).cloneRestoreDisk.executeWithOptions({ summary: `clone ${rbdSpec(d.image)}@${d.snap} → ${rbdSpec(d.clone)}` }, [req]),
  );
  if (input.flatten) {
    progress.phase('flatten');
    await timed(steps, `flatten:${d.target}`, () =>
      restoreCopies(input).flattenRestoreDisk.executeWithOptions({ summary: `flatten ${rbdSpec(d.clone)}` }, [req]),
    );
    progress.flattened(d.target);
  }
  if (!input.verify) return undefined;
  progress.phase('verify');
  const v = await timed(steps, `verify:${d.target}`, () =>
    restoreCopies(input).verifyRestoreDisk.executeWithOptions({ summary: `verify ${rbdSpec(d.clone)}` }, [req]),
  );
  return v.sha256;
}

/** Histories from before in-place restores took the domain lock. Retire with ROUTED (workflows/fleet.ts). */
const LOCKED = 'vmsnap-restore-domain-lock';
