import type { ScheduleDescription, ScheduleSpec, ScheduleUpdateOptions } from '@temporalio/client';
import { parseSnapshotInput } from '../../model/input';
import type { SnapshotRequest } from '../../model/input';
import type { RetentionPolicy } from '../../model/retention';
import { configFrom } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit } from '../output';
import { retentionFrom, retentionText } from '../retention-flags';
import { SCHEDULE_UPDATE } from '../specs/schedule';
import { withClient } from '../temporal-client';
import { WORKFLOW_TYPE, scheduleFailure } from './common';
import { describeSpec, parseOverlap, parseSpec, scheduleId, timezone } from './spec';

/** What the flags change; everything absent stays as the schedule has it. */
interface Changes {
  spec?: ScheduleSpec;
  timezone?: string;
  /** null: remove the policy. */
  retention?: RetentionPolicy | null;
  overlap?: ReturnType<typeof parseOverlap>;
  catchupWindow?: number;
  pauseOnFailure?: boolean;
}

export async function update(argv: string[]): Promise<number> {
  const parsed = parseCommand(SCHEDULE_UPDATE, argv);
  if (!parsed) return Exit.ok;
  const { values, positionals, ms } = parsed;
  if (positionals.length > 1) throw new CliError('schedule update takes one <schedule-id> (see --help)', Exit.badInput);
  const id = scheduleId(positionals[0]);
  const changes = changesFrom(values, ms);
  if (!Object.keys(changes).length) throw new CliError('nothing to update: give a new spec, --keep-… or --no-retention, or a policy flag (see --help)', Exit.badInput);

  return withClient(configFrom(values), async (client) => {
    const handle = client.schedule.getHandle(id);
    let after: { spec: string; retention: RetentionPolicy | null; request: SnapshotRequest } | undefined;
    await handle
      .update((prev) => {
        const next = updated(id, prev, changes);
        after = { spec: describeSpec(next.spec), retention: (next.action.args?.[0] as SnapshotRequest).retention ?? null, request: next.action.args?.[0] as SnapshotRequest };
        return next;
      })
      .catch((err: unknown) => {
        throw scheduleFailure(id, 'update', err);
      });
    const d = await handle.describe().catch(() => undefined);
    const out = { scheduleId: id, updated: Object.keys(changes), spec: after!.spec, retention: after!.retention, overlap: d?.policies.overlap ?? null, nextRun: d?.info.nextActionTimes[0] ?? null, input: after!.request };
    emit(!!values.json, out, () => `updated schedule ${id}: ${out.spec}; retention ${out.retention ? retentionText(out.retention) : 'none (images are kept)'}${out.nextRun ? `; next run ${out.nextRun.toISOString()}` : ''}`);
    return Exit.ok;
  });
}

function changesFrom(v: NonNullable<ReturnType<typeof parseCommand<typeof SCHEDULE_UPDATE.options>>>['values'], ms: { every?: number; 'catchup-window'?: number }): Changes {
  const c: Changes = {};
  if (ms.every !== undefined || v.cron !== undefined || v.window !== undefined) {
    c.spec = parseSpec({ everyMs: ms.every, cron: v.cron, window: v.window, timezone: v.timezone });
  } else if (v.timezone !== undefined) {
    c.timezone = timezone(v.timezone);
  }
  const retention = retentionFrom(v);
  if (retention && v['no-retention']) throw new CliError('give --keep-… or --no-retention, not both', Exit.badInput);
  if (retention) c.retention = retention;
  if (v['no-retention']) c.retention = null;
  if (v.overlap !== undefined) c.overlap = parseOverlap(v.overlap);
  if (ms['catchup-window'] !== undefined) c.catchupWindow = ms['catchup-window'];
  if (v['pause-on-failure'] && v['no-pause-on-failure']) throw new CliError('give --pause-on-failure or --no-pause-on-failure, not both', Exit.badInput);
  if (v['pause-on-failure']) c.pauseOnFailure = true;
  if (v['no-pause-on-failure']) c.pauseOnFailure = false;
  return c;
}

/**
 * The schedule as it will be: the described one with the changes, its run input checked as
 * `create` checks it. Pure (the SDK may call it more than once); a throw leaves the schedule as it
 * was, since nothing has been sent yet.
 */
export function updated(id: string, prev: ScheduleDescription, c: Changes): ScheduleUpdateOptions {
  if (prev.action.type !== 'startWorkflow' || prev.action.workflowType !== WORKFLOW_TYPE) {
    throw new CliError(`schedule "${id}" does not start ${WORKFLOW_TYPE}: not a vmsnap schedule`, Exit.badInput, 'NotVmsnapSchedule');
  }
  const before = prev.action.args?.[0] as SnapshotRequest | undefined;
  if (!before || typeof before !== 'object') throw new CliError(`schedule "${id}" has no run input`, Exit.badInput, 'NotVmsnapSchedule');
  const { retention: _old, ...rest } = before;
  const retention = c.retention === undefined ? before.retention : (c.retention ?? undefined);
  const request: SnapshotRequest = { ...rest, ...(retention ? { retention } : {}) };
  const input = parseSnapshotInput(request);
  if (!input.ok) throw new CliError(`invalid schedule input: ${input.message}`, Exit.badInput, 'InvalidInput');
  const memo = prev.action.memo && typeof prev.action.memo === 'object' ? prev.action.memo : {};
  // The typed search attributes say it all; the untyped copy the SDK also decodes would be sent twice.
  const { searchAttributes: _untyped, ...action } = prev.action;
  return {
    spec: c.spec ?? (c.timezone !== undefined ? { ...prev.spec, timezone: c.timezone } : prev.spec),
    action: { ...action, args: [request], memo: { ...memo, input: request } },
    policies: {
      overlap: c.overlap ?? prev.policies.overlap,
      catchupWindow: c.catchupWindow ?? prev.policies.catchupWindow,
      pauseOnFailure: c.pauseOnFailure ?? prev.policies.pauseOnFailure,
    },
    state: { paused: prev.state.paused, ...(prev.state.note ? { note: prev.state.note } : {}) },
  };
}
