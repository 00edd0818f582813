import { ApplicationFailure } from '@temporalio/common';
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { parseRestoreInput } from '../src/model/restore-input';
import type { RestoreInput, RestoreRequest } from '../src/model/restore-input';
import { rbdSpec } from '../src/model/restore-plan';
import type { RestoreDiskPlan, RestorePlan, RestoreResult } from '../src/model/restore-point';
import { SA } from '../src/model/search-attributes';
import { Compensations } from './compensations';
import { Progress } from './progress';
import { restoreCopies, restoreDomainOps, restorePlanning, restoreUndo, restoreWaits } from './restore-profiles';
import { timed } from './timed';

/**
 * plan → (stop) → clone every disk (→ flatten) (→ verify) → define → start → agent answers.
 *
 * The undo is registered before the first side effect and runs, non-cancellable, on any failure
 * or cancel: the VM gets its definition, disks and power state back; what the restore made goes.
 * Every name derives from the workflow id, so re-running an id reuses or finishes earlier work.
 */
export async function restoreVm(request: RestoreRequest): Promise<RestoreResult> {
  const parsed = parseRestoreInput(request);
  if (!parsed.ok) throw ApplicationFailure.nonRetryable(`invalid input: ${parsed.message}`, FailureType.InvalidInput);
  const input = parsed.input;
  const { workflowId } = workflowInfo();
  const steps: Record<string, number> = {};
  const progress = new Progress(input.as ?? input.domain);

  progress.phase('plan');
  const plan = await timed(steps, 'plan', () =>
    restorePlanning().planRestore.executeWithOptions({ summary: `plan restore of ${input.domain} from ${input.from}` }, [{ workflowId, input }]),
  );
  upsertSearchAttributes([{ key: SA.domain, value: plan.domain.name }]);
  if (plan.alreadyRestored) return finish(plan, [], true);

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
    const settled = await Promise.allSettled(plan.disks.map((d) => copyDisk(d, input, progress, steps)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const sums = settled.map((s) => (s as PromiseFulfilledResult<string | undefined>).value);

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
    return finish(plan, sums, false);
  } catch (err) {
    progress.phase('compensate');
    await saga.run(err);
    progress.phase('failed');
    upsertSearchAttributes([{ key: SA.result, value: 'failed' }]);
    throw err;
  }

  function finish(p: RestorePlan, sums: (string | undefined)[], reused: boolean): RestoreResult {
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

  async function copyDisk(d: RestoreDiskPlan, inp: RestoreInput, prog: Progress, st: Record<string, number>): Promise<string | undefined> {
    const req = { workflowId, disk: d };
    prog.phase('clone');
    await timed(st, `clone:${d.target}`, () =>
      restoreCopies(inp).cloneRestoreDisk.executeWithOptions({ summary: `clone ${rbdSpec(d.image)}@${d.snap} → ${rbdSpec(d.clone)}` }, [req]),
    );
    if (inp.flatten) {
      prog.phase('flatten');
      await timed(st, `flatten:${d.target}`, () =>
        restoreCopies(inp).flattenRestoreDisk.executeWithOptions({ summary: `flatten ${rbdSpec(d.clone)}` }, [req]),
      );
      prog.flattened(d.target);
    }
    if (!inp.verify) return undefined;
    prog.phase('verify');
    const v = await timed(st, `verify:${d.target}`, () =>
      restoreCopies(inp).verifyRestoreDisk.executeWithOptions({ summary: `verify ${rbdSpec(d.clone)}` }, [req]),
    );
    return v.sha256;
  }
}
