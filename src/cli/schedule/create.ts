import { hostTaskQueue } from '../../config';
import { FLEET_TASK_QUEUE } from '../../model/fleet';
import { parseSnapshotInput } from '../../model/input';
import type { SnapshotRequest } from '../../model/input';
import { SA } from '../../model/search-attributes';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { SNAPSHOT_INPUT_HELP, SNAPSHOT_INPUT_OPTIONS, buildRequest } from '../snapshot-flags';
import { MEMO_KEY, WORKFLOW_TYPE, runIdPrefix, scheduleFailure } from './common';
import { withClient } from '../temporal-client';
import type { ScheduleMemo } from './common';
import { parseDuration, parseOverlap, parseSpec, scheduleId } from './spec';

export const CREATE_HELP = `Usage: vmsnap schedule create <schedule-id> --domain D (--every DURATION | --cron EXPR | --window HH:MM-HH:MM) [options]

Creates a Temporal Schedule that starts consistentSnapshot for D by name on the fleet queue
vmsnap: each run finds the host D runs on then, so the schedule follows D through migrations
(--host ID pins it to that host's queue vmsnap-<ID> instead). Each run labels its images vmsnap.label.schedule=<schedule-id>; with a retention
policy, after every successful run the schedule's older images of D are pruned — only images
carrying that label, vmsnap.owner=vmsnap and vmsnap.domain=D, never others.

  --domain D               the libvirt domain to snapshot (required)
  --every DURATION         interval: 90s, 30m, 1h, 1d (at least 10s)
  --cron EXPR              five-field cron, e.g. '0 3 * * *' (or @daily, @hourly...)
  --window HH:MM-HH:MM     daily, at a moment Temporal picks anew each day inside the window
                           (e.g. 01:00-05:00; may cross midnight): a fleet's schedules with one
                           window spread their starts over it
  --timezone TZ            IANA zone for --cron and --window (default UTC)
  --keep-last N            keep the N newest snapshots
  --keep-daily D           keep the newest snapshot of each of the last D days (UTC)
  --verify-every N         after a run, vmsnap verify its image set when none of the N-1 runs of
                           this schedule before it was verified (1: every run); the verdict is in
                           the run's result and on the images; a failed one does not fail the run
  --verify-check 'CMD ARGS'  with --verify-every: run in the copy (as vmsnap verify --check)
  --overlap skip|buffer-one|allow-all   when a run is still going at the next time (default skip;
                           allow-all still runs one snapshot per VM at a time: the others fail DomainBusy)
  --catchup-window DUR     after an outage, start a missed run if it is at most this late (default 1h)
  --pause-on-failure       pause the schedule when a run fails
  --paused                 create it paused
  --note TEXT              note shown with the schedule's state
${SNAPSHOT_INPUT_HELP}
${COMMON_HELP}`;

export async function create(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...SNAPSHOT_INPUT_OPTIONS,
    domain: { type: 'string' },
    every: { type: 'string' },
    cron: { type: 'string' },
    window: { type: 'string' },
    timezone: { type: 'string' },
    'keep-last': { type: 'string' },
    'keep-daily': { type: 'string' },
    'verify-every': { type: 'string' },
    'verify-check': { type: 'string' },
    overlap: { type: 'string' },
    'catchup-window': { type: 'string' },
    'pause-on-failure': { type: 'boolean' },
    paused: { type: 'boolean' },
    note: { type: 'string' },
  });
  if (values.help) {
    process.stdout.write(CREATE_HELP + '\n');
    return Exit.ok;
  }
  if (positionals.length > 1) throw new CliError('schedule create takes one <schedule-id> (see --help)', Exit.badInput);
  const id = scheduleId(positionals[0]);
  if (!values.domain) throw new CliError('--domain is required (see --help)', Exit.badInput);
  const spec = parseSpec(values);
  const overlap = parseOverlap(values.overlap);
  const catchupWindow = parseDuration('catchup-window', values['catchup-window'] ?? '1h');
  const config = configFrom(values);

  const request = scheduledRequest(id, buildRequest(values.domain, values, config.imagePool), values);
  const parsed = parseSnapshotInput(request);
  if (!parsed.ok) throw new CliError(`invalid schedule input: ${parsed.message}`, Exit.badInput);
  // By name, wherever the VM runs (and after it migrates); --host pins the schedule to one host.
  const pinned = values.host !== undefined;
  const taskQueue = pinned ? hostTaskQueue(config.host) : FLEET_TASK_QUEUE;
  const host = pinned ? config.host : FLEET_TASK_QUEUE;
  const specText = values.every ? `every ${values.every}` : values.window ? `daily in ${values.window}` : `cron ${values.cron!.trim()}`;
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
          staticSummary: `scheduled snapshot of ${request.domain} (${id}) → ${parsed.input.target.pool}`,
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
function scheduledRequest(id: string, base: SnapshotRequest, v: Record<string, unknown>): SnapshotRequest {
  if (base.labels?.schedule !== undefined && base.labels.schedule !== id) {
    throw new CliError('--label schedule=... is reserved: a schedule labels its images with its own id', Exit.badInput);
  }
  const retention = JSON.parse(JSON.stringify({ keepLast: count(v, 'keep-last'), keepDaily: count(v, 'keep-daily') })) as SnapshotRequest['retention'];
  const verifyEvery = count(v, 'verify-every');
  const verifyCheck = (v['verify-check'] as string | undefined)?.split(/\s+/).filter(Boolean);
  if (verifyCheck && verifyEvery === undefined) throw new CliError('--verify-check needs --verify-every', Exit.badInput);
  return {
    ...base,
    labels: { ...base.labels, schedule: id },
    ...(retention && Object.keys(retention).length ? { retention } : {}),
    ...(verifyEvery !== undefined ? { verifyEvery } : {}),
    ...(verifyCheck?.length ? { verifyCheck } : {}),
  };
}

function count(v: Record<string, unknown>, flag: string): number | undefined {
  const s = v[flag] as string | undefined;
  if (s === undefined) return undefined;
  if (!/^[1-9][0-9]{0,5}$/.test(s)) throw new CliError(`--${flag} expects a positive integer, got "${s}"`, Exit.badInput);
  return Number(s);
}

export function retentionText(r: { keepLast?: number; keepDaily?: number }): string {
  return [r.keepLast && `keep-last ${r.keepLast}`, r.keepDaily && `keep-daily ${r.keepDaily}`].filter(Boolean).join(' + ');
}
