import { WorkflowFailedError } from '@temporalio/client';
import type { Client, ScheduleDescription } from '@temporalio/client';
import type { SnapshotResult } from '../../model/types';
import { humanResult } from '../commands/snapshot';
import { configFrom } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { describeFailure, exitCodeFor } from '../failure-exit';
import { parseCommand } from '../options';
import { emit } from '../output';
import { SCHEDULE_DELETE, SCHEDULE_PAUSE, SCHEDULE_TRIGGER, SCHEDULE_UNPAUSE } from '../specs/schedule';
import { scheduleFailure } from './common';
import { withClient } from '../temporal-client';
import { parseOverlap, scheduleId } from './spec';

/** pause/unpause: the same shape, one server call each. */
export function setPaused(paused: boolean) {
  return async (argv: string[]): Promise<number> => {
    const parsed = parseCommand(paused ? SCHEDULE_PAUSE : SCHEDULE_UNPAUSE, argv);
    if (!parsed) return Exit.ok;
    const { values, positionals } = parsed;
    const id = oneId(positionals, paused ? 'pause' : 'unpause');
    return withClient(configFrom(values), async (client) => {
      const h = client.schedule.getHandle(id);
      const note = values.note ?? `${paused ? 'paused' : 'unpaused'} by vmsnap CLI`;
      await (paused ? h.pause(note) : h.unpause(note)).catch((err: unknown) => {
        throw scheduleFailure(id, paused ? 'pause' : 'unpause', err);
      });
      emit(!!values.json, { scheduleId: id, paused, note }, () => `${paused ? 'paused' : 'unpaused'} schedule ${id}`);
      return Exit.ok;
    });
  };
}

export async function remove(argv: string[]): Promise<number> {
  const parsed = parseCommand(SCHEDULE_DELETE, argv);
  if (!parsed) return Exit.ok;
  const { values, positionals } = parsed;
  const id = oneId(positionals, 'delete');
  return withClient(configFrom(values), async (client) => {
    await client.schedule
      .getHandle(id)
      .delete()
      .catch((err: unknown) => {
        throw scheduleFailure(id, 'delete', err);
      });
    emit(!!values.json, { scheduleId: id, deleted: true }, () => `deleted schedule ${id} (its images are kept)`);
    return Exit.ok;
  });
}

export async function trigger(argv: string[]): Promise<number> {
  const parsed = parseCommand(SCHEDULE_TRIGGER, argv);
  if (!parsed) return Exit.ok;
  const { values, positionals } = parsed;
  const id = oneId(positionals, 'trigger');
  const overlap = values.overlap === undefined ? undefined : parseOverlap(values.overlap);
  return withClient(configFrom(values), async (client) => {
    const h = client.schedule.getHandle(id);
    const fail = (doing: string) => (err: unknown) => {
      throw scheduleFailure(id, doing, err);
    };
    const before = values.wait ? await h.describe().catch(fail('describe')) : undefined;
    await h.trigger(overlap).catch(fail('trigger'));
    if (!before) {
      emit(!!values.json, { scheduleId: id, triggered: true }, () => `triggered schedule ${id}`);
      return Exit.ok;
    }
    const started = await startedRun(client, id, before);
    if (!started) {
      const msg = `schedule ${id}: the trigger was skipped (a run is in progress and the overlap policy is ${before.policies.overlap})`;
      emit(!!values.json, { scheduleId: id, triggered: false, reason: msg }, () => msg);
      return Exit.failed;
    }
    try {
      const result = (await client.workflow.getHandle(started.workflowId, started.runId).result()) as SnapshotResult;
      emit(!!values.json, { scheduleId: id, ...result }, () => humanResult(result) + retentionLine(result));
      return Exit.ok;
    } catch (err) {
      if (!(err instanceof WorkflowFailedError)) throw err;
      const d = describeFailure(err);
      emit(!!values.json, { scheduleId: id, workflowId: started.workflowId, status: 'failed', ...d }, () => `FAILED ${started.workflowId}: [${d.type}] ${d.message}`);
      return exitCodeFor(err);
    }
  });
}

/** The run the trigger started: a new action in the schedule's info, or none if it was skipped. */
async function startedRun(client: Client, id: string, before: ScheduleDescription): Promise<{ workflowId: string; runId: string } | undefined> {
  const known = new Set([...before.info.recentActions.map((a) => a.action.workflow.firstExecutionRunId)]);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const d = await client.schedule.getHandle(id).describe();
    const fresh = d.info.recentActions.find((a) => !known.has(a.action.workflow.firstExecutionRunId));
    if (fresh) return { workflowId: fresh.action.workflow.workflowId, runId: fresh.action.workflow.firstExecutionRunId };
    if (d.info.numActionsSkippedOverlap > before.info.numActionsSkippedOverlap) return undefined;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new CliError(`schedule ${id}: no run appeared within 30 s of the trigger`, Exit.failed);
}

function retentionLine(r: SnapshotResult): string {
  if (!r.retention) return '';
  const x = r.retention;
  if (x.error) return `\n  retention FAILED (images kept; the next run retries): ${x.error}`;
  const skipped = x.skipped.length ? `; skipped ${x.skipped.map((s) => `${s.image} (${s.reason})`).join(', ')}` : '';
  return `\n  retention: kept ${x.kept.length}, pruned ${x.pruned.length}${x.pruned.length ? ` (${x.pruned.join(', ')})` : ''}${skipped}`;
}

function oneId(positionals: string[], verb: string): string {
  if (positionals.length > 1) throw new CliError(`schedule ${verb} takes one <schedule-id>`, Exit.badInput);
  return scheduleId(positionals[0]);
}
