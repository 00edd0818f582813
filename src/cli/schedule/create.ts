import { hostTaskQueue } from '../../config';
import { FLEET_TASK_QUEUE } from '../../model/fleet';
import { parseSnapshotInput } from '../../model/input';
import type { SnapshotRequest } from '../../model/input';
import { SA } from '../../model/search-attributes';
import { configFrom } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import type { Values } from '../options';
import { emit } from '../output';
import { retentionFrom, retentionText } from '../retention-flags';
import { buildRequest } from '../snapshot-flags';
import { SCHEDULE_CREATE } from '../specs/schedule';
import { MEMO_KEY, WORKFLOW_TYPE, runIdPrefix, scheduleFailure } from './common';
import { withClient } from '../temporal-client';
import type { ScheduleMemo } from './common';
import { describeSpec, parseOverlap, parseSpec, scheduleId } from './spec';

export async function create(argv: string[]): Promise<number> {
  const parsed = parseCommand(SCHEDULE_CREATE, argv);
  if (!parsed) return Exit.ok;
  const { values, positionals, ms } = parsed;
  if (positionals.length > 1) throw new CliError('schedule create takes one <schedule-id> (see --help)', Exit.badInput);
  const id = scheduleId(positionals[0]);
  if (!values.domain) throw new CliError('--domain is required (see --help)', Exit.badInput);
  const spec = parseSpec({ everyMs: ms.every, cron: values.cron, window: values.window, timezone: values.timezone });
  const overlap = parseOverlap(values.overlap);
  const catchupWindow = ms['catchup-window'] ?? 3_600_000;
  const config = configFrom(values);

  const request = scheduledRequest(id, buildRequest(values.domain, values, ms, config.imagePool), values);
  const input = parseSnapshotInput(request);
  if (!input.ok) throw new CliError(`invalid schedule input: ${input.message}`, Exit.badInput, 'InvalidInput');
  // By name, wherever the VM runs (and after it migrates); --host pins the schedule to one host.
  const pinned = values.host !== undefined;
  const taskQueue = pinned ? hostTaskQueue(config.host) : FLEET_TASK_QUEUE;
  const host = pinned ? config.host : FLEET_TASK_QUEUE;
  const specText = describeSpec(spec);
  const memo: ScheduleMemo = { domain: request.domain, host, spec: specText, ...(request.retention ? { retention: request.retention } : {}) };
  const attrs = [{ key: SA.domain, value: request.domain }, ...(pinned ? [{ key: SA.host, value: config.host }] : [])];

  return withClient(config, async (client) => {
    const handle = await client.schedule
      .create({
        scheduleId: id,
        spec,
        action: {
          type: 'startWorkflow',
          workflowType: WORKFLOW_TYPE,
          taskQueue,
          workflowId: runIdPrefix(id),
          args: [request],
          memo: { input: request, schedule: id },
          typedSearchAttributes: [...attrs, { key: SA.phase, value: 'queued' }],
          staticSummary: `scheduled snapshot of ${request.domain} (${id}) → ${input.input.target.pool}`,
        },
        policies: { overlap, catchupWindow, pauseOnFailure: !!values['pause-on-failure'] },
        state: { paused: !!values.paused, ...(values.note ? { note: values.note } : {}) },
        memo: { [MEMO_KEY]: memo },
        typedSearchAttributes: attrs,
      })
      .catch((err: unknown) => {
        throw scheduleFailure(id, 'create', err);
      });
    const desc = await handle.describe().catch(() => undefined);
    const next = desc?.info.nextActionTimes[0];
    const out = { scheduleId: id, domain: request.domain, host, taskQueue, spec: specText, overlap, retention: request.retention ?? null, paused: !!values.paused, nextRun: next ?? null, input: request };
    emit(!!values.json, out, () => {
      const keep = request.retention ? `, retention ${retentionText(request.retention)}` : '';
      return `created schedule ${id}: ${request.domain} ${specText} on ${taskQueue}${keep}${next ? `; next run ${next.toISOString()}` : ''}`;
    });
    return Exit.ok;
  });
}

/** The schedule's workflow input: the snapshot flags plus its own label and retention policy. */
function scheduledRequest(id: string, base: SnapshotRequest, v: Values<typeof SCHEDULE_CREATE.options>): SnapshotRequest {
  if (base.labels?.schedule !== undefined && base.labels.schedule !== id) {
    throw new CliError('--label schedule=... is reserved: a schedule labels its images with its own id', Exit.badInput);
  }
  const retention = retentionFrom(v);
  const verifyEvery = count(v['verify-every'], 'verify-every');
  const verifyCheck = v['verify-check']?.split(/\s+/).filter(Boolean);
  if (verifyCheck && verifyEvery === undefined) throw new CliError('--verify-check needs --verify-every', Exit.badInput);
  return {
    ...base,
    labels: { ...base.labels, schedule: id },
    ...(retention ? { retention } : {}),
    ...(verifyEvery !== undefined ? { verifyEvery } : {}),
    ...(verifyCheck?.length ? { verifyCheck } : {}),
  };
}

function count(s: string | undefined, flag: string): number | undefined {
  if (s === undefined) return undefined;
  if (!/^[1-9][0-9]{0,5}$/.test(s)) throw new CliError(`--${flag} expects a positive integer, got "${s}"`, Exit.badInput);
  return Number(s);
}
