import type { Client, ScheduleDescription, ScheduleExecutionResult } from '@temporalio/client';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { WORKFLOW_TYPE, memoOf, scheduleFailure } from './common';
import { withClient } from '../temporal-client';
import { retentionText } from './create';
import { describeSpec, scheduleId } from './spec';

export const LIST_HELP = `Usage: vmsnap schedule list [--domain D]

Lists vmsnap's schedules (those starting ${WORKFLOW_TYPE}): id, domain, spec, state, next run.
${COMMON_HELP}`;

export const DESCRIBE_HELP = `Usage: vmsnap schedule describe <schedule-id>

Spec, overlap policy, retention, state, counts, next runs, and the recent runs with their status.
${COMMON_HELP}`;

export async function list(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { domain: { type: 'string' } });
  if (values.help) return help(LIST_HELP);
  if (positionals.length) throw new CliError('schedule list takes no arguments (see --help)', Exit.badInput);
  return withClient(configFrom(values), async (client) => {
    const rows: ListRow[] = [];
    try {
      for await (const s of client.schedule.list()) {
        if (s.action?.workflowType !== WORKFLOW_TYPE) continue;
        const memo = memoOf(s.memo);
        if (values.domain && memo?.domain !== values.domain) continue;
        rows.push({
          scheduleId: s.scheduleId,
          domain: memo?.domain ?? null,
          host: memo?.host ?? null,
          spec: memo?.spec ?? (s.spec ? describeSpec(s.spec) : null),
          retention: memo?.retention ?? null,
          paused: s.state.paused,
          nextRun: s.info.nextActionTimes[0] ?? null,
          lastRun: latest(s.info.recentActions)?.action.workflow.workflowId ?? null,
        });
      }
    } catch (err) {
      throw scheduleFailure('*', 'list', err);
    }
    rows.sort((a, b) => (a.scheduleId < b.scheduleId ? -1 : 1));
    emit(!!values.json, rows, () =>
      rows.length
        ? rows
            .map((r) => `${r.scheduleId}\t${r.domain ?? '?'}\t${r.spec}\t${r.paused ? 'paused' : 'active'}\tnext ${r.nextRun?.toISOString() ?? '-'}`)
            .join('\n')
        : 'no vmsnap schedules',
    );
    return Exit.ok;
  });
}

export async function describe(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {});
  if (values.help) return help(DESCRIBE_HELP);
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
  spec: string | null;
  retention: { keepLast?: number; keepDaily?: number } | null;
  paused: boolean;
  nextRun: Date | null;
  lastRun: string | null;
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
    spec: memo?.spec ?? describeSpec(d.spec),
    overlap: d.policies.overlap,
    catchupWindowMs: d.policies.catchupWindow,
    pauseOnFailure: d.policies.pauseOnFailure,
    retention: memo?.retention ?? null,
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

function help(text: string): number {
  process.stdout.write(text + '\n');
  return Exit.ok;
}
