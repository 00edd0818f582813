import { executeChild, isCancellation, workflowInfo } from '@temporalio/workflow';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import type { SnapshotInput } from '../src/model/input';
import type { SnapshotResult } from '../src/model/types';
import type { VerifyRequest, VerifyResult } from '../src/model/verification';
import { messageOf } from './failure-of';
import { unwrapChild } from './child-failure';
import type { Progress } from './progress';
import { catalogOps } from './activity-profiles';


/**
 * input.verifyEvery: once the snapshot succeeded, its image set is verified when due
 * (src/model/verify-every.ts), by a vmsnap verify child on the fleet queue, awaited so the run's
 * result carries the verdict. The snapshot stands whatever the verify says: a failed verdict, or
 * a verify run that failed, is reported in `verification`, never as the snapshot's failure.
 * Called by whichever run answers the caller (the router, or a run started on a host's queue).
 */
export async function verifyIfDue(input: SnapshotInput, result: SnapshotResult, progress: Progress): Promise<SnapshotResult> {
  if (!input.verifyEvery || !result.disks.some((d) => d.image)) return result;
  const childId = `${workflowInfo().workflowId}.verify`;
  try {
    const due = await catalogOps().verificationIsDue.executeWithOptions({ summary: `is the set of ${result.workflowId} due for verify (every ${input.verifyEvery})?` }, [
      {
        imagePool: input.target.pool,
        domain: result.domain.uuid,
        workflowId: result.workflowId,
        every: input.verifyEvery,
        ...(input.labels.schedule ? { schedule: input.labels.schedule } : {}),
      },
    ]);
    if (!due) return result;
  } catch (err) {
    if (isCancellation(err)) throw err;
    return { ...result, verification: { error: `whether it is due is unknown: ${messageOf(err)}`, workflowId: childId } };
  }
  progress.phase('verify');
  const request: VerifyRequest = { domain: result.domain.uuid, from: result.workflowId, imagePool: input.target.pool, ...(input.verifyCheck ? { check: input.verifyCheck } : {}) };
  let verification: NonNullable<SnapshotResult['verification']>;
  try {
    const v: VerifyResult = await executeChild('verifySnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: childId, args: [request] });
    const { domain: _d, fromWorkflowId: _f, copy: _c, stepsMs: _s, ...verdict } = v;
    verification = verdict;
  } catch (err) {
    if (isCancellation(err)) throw err;
    verification = { error: messageOf(unwrapChild(err)), workflowId: childId };
  }
  progress.phase('done');
  return { ...result, verification };
}
