import { ApplicationFailure } from '@temporalio/common';
import { startChild, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { catalogOps } from './activity-profiles';
import type { RestoreInput } from '../src/model/restore-input';
import { placeRestore } from '../src/model/restore-placement';
import type { RestoreResult } from '../src/model/restore-point';
import { SA } from '../src/model/search-attributes';
import { unwrapChild } from './child-failure';
import { askHosts, lookUntilSure } from './locate';
import { Progress } from './progress';

/**
 * restoreVm started on the fleet queue (the CLI's default, and what a backup system would start).
 * The image set is chosen once, here; its VM is found by UUID on every live host; the restore then
 * runs whole as a child on that host's queue, so every step (stop, swap, define, start) happens
 * beside the VM's own libvirtd, and the child takes the VM's domain lock as snapshot runs do.
 * Nothing is changed before the placement is certain.
 */
export async function routeRestore(input: RestoreInput): Promise<RestoreResult> {
  const { workflowId } = workflowInfo();
  const progress = new Progress(input.as ?? input.domain);
  progress.phase('plan');
  const source = await catalogOps().restoreSource.executeWithOptions({ summary: `which image set of ${input.domain} (${input.from})` }, [{ input }]);
  const where = {
    uuid: source.domain.uuid,
    name: source.domain.name,
    mode: input.as ? ('as' as const) : ('in-place' as const),
    stop: input.stop,
    ...(input.host ? { host: input.host } : {}),
    ...(input.as && source.memoryKiB ? { needKiB: source.memoryKiB } : {}),
  };
  // A new VM needs memory where it lands: hosts say how much they have when there is a choice.
  const room = where.mode === 'as' && !where.host;
  const placed = await lookUntilSure(async () => placeRestore(where, ...(await asked(source.domain.uuid, room))), (p) => !p.ok && p.retry);
  if (!placed.ok) {
    if (placed.retry) throw ApplicationFailure.retryable(placed.message, placed.type);
    throw ApplicationFailure.nonRetryable(placed.message, placed.type);
  }
  upsertSearchAttributes([{ key: SA.host, value: placed.host }]);
  const childId = `${workflowId}.on.${placed.host}`;
  progress.delegate(placed.host, childId);
  const child = await startChild('restoreVm', {
    taskQueue: placed.taskQueue,
    workflowId: childId,
    // By UUID and by run: the child restores exactly the set chosen here, of exactly this VM.
    args: [{ ...requestOf(input), domain: source.domain.uuid, from: source.fromWorkflowId, routedBy: workflowId }],
  });
  try {
    const result = (await child.result()) as RestoreResult;
    progress.phase('done');
    upsertSearchAttributes([{ key: SA.result, value: 'succeeded' }]);
    return result;
  } catch (err) {
    progress.phase('failed');
    upsertSearchAttributes([{ key: SA.result, value: 'failed' }]);
    throw unwrapChild(err);
  }
}

async function asked(uuid: string, room: boolean): Promise<[Awaited<ReturnType<typeof askHosts>>['answers'], string[]]> {
  const { answers, unanswered } = await askHosts(uuid, room);
  return [answers, unanswered];
}

/** The parsed input back as a request (defaults made explicit), without the router's own fields. */
function requestOf(input: RestoreInput): RestoreInput {
  const { host: _host, routedBy: _routedBy, ...rest } = input;
  return rest;
}
