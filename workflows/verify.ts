import { ApplicationFailure } from '@temporalio/common';
import { executeChild, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { catalogOps } from './activity-profiles';
import { FailureType } from '../src/model/failures';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import { parseRestoreInput } from '../src/model/restore-input';
import type { RestoreRequest } from '../src/model/restore-input';
import type { RestoreResult } from '../src/model/restore-point';
import { SA } from '../src/model/search-attributes';
import { copyName, isVerdictFailure, parseVerifyInput } from '../src/model/verification';
import type { Verification, VerifyRequest, VerifyResult } from '../src/model/verification';
import { checkedInput } from './checked-input';
import { failureType, messageOf } from './failure-of';
import { unwrapChild } from './child-failure';
import { Progress } from './progress';
import { timed } from './timed';

/**
 * vmsnap verify: does this image set restore to a VM that boots (and passes a check)? The set is
 * restored as a throw-away copy — restoreVm with `as` (its own name and UUID, every host path its
 * own), `isolate` (no NICs) and `throwaway` (check, then everything the restore made removed,
 * through restore's own undo; the restore reaper takes what a crash leaves). The source VM and its
 * disks are never touched. Bounded: the copy's boot by readyTimeoutMs, the check by
 * checkTimeoutMs, every other step by its activity timeout. The verdict is recorded on the set.
 * A set that does not come up is a `failed` verdict, not a failed run; Ceph or libvirt unreachable,
 * bad input or a failed clean-up fail the run.
 */
export async function verifySnapshot(request: VerifyRequest): Promise<VerifyResult> {
  const input = checkedInput(parseVerifyInput(request));
  const { workflowId, runId } = workflowInfo();
  const steps: Record<string, number> = {};
  const progress = new Progress(input.domain);

  progress.phase('plan');
  const lookup = parseRestoreInput({ domain: input.domain, from: input.from, imagePool: input.imagePool });
  if (!lookup.ok) throw ApplicationFailure.nonRetryable(`invalid input: ${lookup.message}`, FailureType.InvalidInput);
  const source = await timed(steps, 'plan', () =>
    catalogOps().restoreSource.executeWithOptions({ summary: `which image set of ${input.domain} (${input.from})` }, [{ input: lookup.input }]),
  );
  upsertSearchAttributes([{ key: SA.domain, value: source.domain.name }]);
  const copy = copyName(source.domain.name, runId);
  const restore: RestoreRequest = {
    domain: source.domain.uuid,
    from: source.fromWorkflowId,
    as: copy,
    isolate: true,
    imagePool: input.imagePool,
    readyTimeoutMs: input.readyTimeoutMs,
    throwaway: { ...(input.check ? { check: input.check } : {}), checkTimeoutMs: input.checkTimeoutMs },
    ...(input.host ? { host: input.host } : {}),
  };

  progress.phase('start');
  const at = () => new Date().toISOString();
  let verification: Verification;
  try {
    const r = await timed(steps, 'copy', () =>
      executeChild('restoreVm', { taskQueue: FLEET_TASK_QUEUE, workflowId: `${workflowId}.copy`, args: [restore] }),
    );
    verification = verdictOf(r, input.checkTimeoutMs, workflowId, at());
  } catch (err) {
    const cause = unwrapChild(err);
    const type = failureType(cause);
    if (!isVerdictFailure(type)) throw cause;
    verification = { verdict: 'failed', reason: `${type}: ${messageOf(cause)}`, at: at(), workflowId };
  }

  progress.phase('record');
  await timed(steps, 'record', () =>
    catalogOps().recordVerification.executeWithOptions({ summary: `record "${verification.verdict}" on the set of ${source.fromWorkflowId}` }, [
      { imagePool: input.imagePool, domain: source.domain.uuid, fromWorkflowId: source.fromWorkflowId, verification },
    ]),
  );
  progress.phase(verification.verdict === 'verified' ? 'done' : 'failed');
  upsertSearchAttributes([{ key: SA.result, value: verification.verdict === 'verified' ? 'succeeded' : 'failed' }]);
  return { ...verification, domain: source.domain, fromWorkflowId: source.fromWorkflowId, copy, stepsMs: steps };
}

function verdictOf(r: RestoreResult, checkTimeoutMs: number, workflowId: string, at: string): Verification {
  const base = { at, workflowId, ...(r.stepsMs.ready !== undefined ? { readyMs: r.stepsMs.ready } : {}), ...(r.check ? { check: r.check } : {}) };
  const c = r.check;
  if (!c || c.code === 0) return { verdict: 'verified', ...base };
  const reason = c.code === null
    ? `check ${c.argv.join(' ')} did not exit within ${checkTimeoutMs} ms`
    : `check ${c.argv.join(' ')} exited ${c.code} (last of ${c.attempts} runs in ${checkTimeoutMs} ms)`;
  return { verdict: 'failed', reason, ...base };
}
