import type { Client, ScheduleDescription, ScheduleExecutionResult } from '@temporalio/client';
import type { SnapshotRequest } from '../../model/input';
import type { RetentionPolicy } from '../../model/retention';
import { configFrom } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit } from '../output';
import { retentionText } from '../retention-flags';
import { SCHEDULE_DESCRIBE, SCHEDULE_LIST } from '../specs/schedule';
import { WORKFLOW_TYPE, memoOf, scheduleFailure } from './common';
import { withClient } from '../temporal-client';
import { describeSpec, scheduleId } from './spec';

/** Describes at a time while listing: a fleet has a schedule per VM. */
const DESCRIBE_CONCURRENCY = 8;

export async function list(argv: string[]): Promise<number> {
  const parsed = parseCommand(SCHEDULE_LIST, argv);
  if (!parsed) return Exit.ok;
  const { values, positionals } = parsed;
  if (positionals.length) throw new CliError('schedule list takes no arguments (see --help)', Exit.badInput);
  return withClient(configFrom(values), async (client) => {
    const found: { id: string; domain: string | null; host: string | null }[] = [];
    try {
      for await (const s of client.schedule.list()) {
        if (s.action?.workflowType !== WORKFLOW_TYPE) continue;
        const memo = memoOf(s.memo);
        if (values.domain && memo?.domain !== values.domain) continue;
        found.push({ id: s.scheduleId, domain: memo?.domain ?? null, host: memo?.host ?? null });
      }
    } catch (err) {
      throw scheduleFailure('*', 'list', err);
    }
    // The list's summaries carry neither the run input (the retention) nor a spec `schedule
    // update` changed in a form the memo could follow: each schedule is described.
    const rows = await mapLimit(found, DESCRIBE_CONCURRENCY, async (f): Promise<ListRow | undefined> => {
      const d = await client.schedule
        .getHandle(f.id)
        .describe()
        .catch((err: unknown) => {
          if (scheduleFailure(f.id, 'describe', err).type === 'NotFound') return undefined; // deleted since the listing
          throw scheduleFailure(f.id, 'describe', err);
        });
      if (!d) return undefined;
      return {
        scheduleId: f.id,
        domain: f.domain,
        host: f.host,
        spec: describeSpec(d.spec),
        retention: retentionOf(d),
        paused: d.state.paused,
        nextRun: d.info.nextActionTimes[0] ?? null,
        lastRun: latest(d.info.recentActions)?.action.workflow.workflowId ?? null,
      };
    });
    const out = rows.filter((r): r is ListRow => r !== undefined).sort((a, b) => (a.scheduleId < b.scheduleId ? -1 : 1));
    emit(!!values.json, out, () =>
      out.length
        ? out.map((r) => `${r.scheduleId}\t${r.domain ?? '?'}\t${r.spec}\t${r.paused ? 'paused' : 'active'}\tnext ${r.nextRun?.toISOString() ?? '-'}`).join('\n')
        : 'no vmsnap schedules',
    );
    return Exit.ok;
  });
}

export async function describe(argv: string[]): Promise<number> {
  const parsed = parseCommand(SCHEDULE_DESCRIBE, argv);
  if (!parsed) return Exit.ok;
  const { values, positionals } = parsed;
  if (positionals.length > 1) throw new CliError('schedule describe takes one <schedule-id>', Exit.badInput);
  const id = scheduleId(positionals[0]);
  return withClient(configFrom(values), async (client) => {
    const d = await client.schedule
      .getHandle(id)
      .describe()
      .catch((err: unknown) => {
        throw scheduleFailure(id, 'describe', err);
      });
    const out = await summarize(client, d);
    emit(!!values.json, out, () => humanDescription(out));
    return Exit.ok;
  });
}

interface ListRow {
  scheduleId: string;
  domain: string | null;
  host: string | null;
  spec: string;
  retention: RetentionPolicy | null;
  paused: boolean;
  nextRun: Date | null;
  lastRun: string | null;
}

/** The retention the next run gets: its input's, not the memo's (which `schedule update` cannot change). */
function retentionOf(d: ScheduleDescription): RetentionPolicy | null {
  const input = d.action.args?.[0] as SnapshotRequest | undefined;
  return input?.retention ?? null;
}

type Summary = Awaited<ReturnType<typeof summarize>>;

async function summarize(client: Client, d: ScheduleDescription) {
  const memo = memoOf(d.memo);
  const recent = [...d.info.recentActions].sort((a, b) => b.takenAt.getTime() - a.takenAt.getTime()).slice(0, 10);
  const runs = await Promise.all(
    recent.map(async (r) => ({
      workflowId: r.action.workflow.workflowId,
      scheduledAt: r.scheduledAt,
      status: await client.workflow
        .getHandle(r.action.workflow.workflowId, r.action.workflow.firstExecutionRunId)
        .describe()
        .then((w) => w.status.name as string)
        .catch(() => 'UNKNOWN'),
    })),
  );
  return {
    scheduleId: d.scheduleId,
    domain: memo?.domain ?? null,
    host: memo?.host ?? null,
    taskQueue: d.action.taskQueue,
    spec: describeSpec(d.spec),
    overlap: d.policies.overlap,
    catchupWindowMs: d.policies.catchupWindow,
    pauseOnFailure: d.policies.pauseOnFailure,
    retention: retentionOf(d),
    paused: d.state.paused,
    note: d.state.note ?? null,
    actionsTaken: d.info.numActionsTaken,
    skippedOverlap: d.info.numActionsSkippedOverlap,
    missedCatchupWindow: d.info.numActionsMissedCatchupWindow,
    running: d.info.runningActions.map((a) => a.workflow.workflowId),
    nextRuns: d.info.nextActionTimes.slice(0, 3),
    recentRuns: runs,
    createdAt: d.info.createdAt,
    input: d.action.args?.[0] ?? null,
  };
}

function humanDescription(s: Summary): string {
  const lines = [
    `schedule ${s.scheduleId}: ${s.paused ? 'PAUSED' : 'ACTIVE'}${s.note ? ` (${s.note})` : ''}`,
    `  domain:    ${s.domain ?? '?'} on ${s.taskQueue}`,
    `  spec:      ${s.spec}; overlap ${s.overlap}${s.pauseOnFailure ? '; pauses on failure' : ''}`,
    `  retention: ${s.retention ? retentionText(s.retention) : 'none (images are kept)'}`,
    `  runs:      ${s.actionsTaken} started, ${s.skippedOverlap} skipped (overlap), ${s.missedCatchupWindow} missed`,
  ];
  if (s.running.length) lines.push(`  running:   ${s.running.join(', ')}`);
  if (!s.paused && s.nextRuns.length) lines.push(`  next:      ${s.nextRuns.map((t) => t.toISOString()).join(', ')}`);
  for (const r of s.recentRuns) lines.push(`  ${r.scheduledAt.toISOString()}  ${r.status.padEnd(10)} ${r.workflowId}`);
  return lines.join('\n');
}

function latest(actions: ScheduleExecutionResult[]): ScheduleExecutionResult | undefined {
  return [...actions].sort((a, b) => b.takenAt.getTime() - a.takenAt.getTime())[0];
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
