/**
 * vmsnap: the real `consistentSnapshot` workflow through the real Temporal server and a host
 * worker running in this process (createHostWorker, as the integration tests start it), in
 * snapshot-only mode (`target.clone: false`: inspect → lock → freeze → snapshot → thaw → keep
 * the snapshot), with `quiesce: 'require'`. The window is the workflow's own `freezeWindowMs`
 * (worker clock: freeze call start → thaw call return). For the guest probe, the absolute freeze
 * start and thaw return are read back from the local-activity markers in the run's history.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { removeOmapKey, openImage } from '../src/ceph';
import { windowBreakdown } from '../src/model/freeze-window';
import type { TimedCall } from '../src/model/freeze-window';
import type { SnapshotRequest } from '../src/model/input';
import type { PreFlushResult } from '../src/model/pre-flush';
import { cephTestEnv } from '../support/ceph';
import { OWNER_OBJECT, ownerKey } from '../src/model/owner-record';
import type { SnapshotResult } from '../src/model/types';
import type { consistentSnapshot } from '../workflows';
import { nowMs } from './clock';
import type { Contender, RunTiming } from './contender';
import { removeSnapIfAny } from './lab-context';
import type { Guest, LabContext } from './lab-context';

export interface WorkflowRun {
  result: SnapshotResult;
  e2eMs: number;
  startMs: number;
  endMs: number;
}

/** Starts one consistentSnapshot run and waits for its result. */
export async function runSnapshotWorkflow(client: Client, taskQueue: string, request: SnapshotRequest, idPrefix = 'bench'): Promise<WorkflowRun> {
  const workflowId = `${idPrefix}-${randomUUID().slice(0, 12)}`;
  const startMs = nowMs();
  const result = await client.workflow.execute<typeof consistentSnapshot>('consistentSnapshot', {
    taskQueue,
    workflowId,
    args: [request],
    workflowExecutionTimeout: '10m',
  });
  const endMs = nowMs();
  return { result, e2eMs: endMs - startMs, startMs, endMs };
}

/** Removes what a snapshot-only run kept: the source snapshot and its owner record. */
export async function removeKeptSnapshots(ctx: LabContext, result: SnapshotResult): Promise<void> {
  for (const d of result.disks) {
    const m = /^([^/]+)\/([^@]+)@(.+)$/.exec(d.snapshot);
    if (!m) continue;
    const img = await openImage(await ctx.ioctx(m[1]!), m[2]!);
    try {
      await removeSnapIfAny(img, m[3]!);
    } finally {
      await img.close();
    }
    await removeOmapKey(cephTestEnv(), { pool: m[1]!, object: OWNER_OBJECT }, ownerKey(m[2]!, m[3]!));
  }
}

/** Absolute freeze start / thaw return (worker clock) from the run's local-activity markers. */
export interface HistoryWindow {
  freezeStartMs: number;
  thawReturnMs: number;
  /** Between the local activities, inside the window: freeze return → snapshot start, snapshot return → thaw start. */
  freezeToSnapshotMs?: number;
  snapshotToThawMs?: number;
  /** The pre-flush before the freeze (worker clock), when the worker ran one. */
  preFlush?: PreFlushResult;
}

export async function windowFromHistory(client: Client, workflowId: string): Promise<HistoryWindow | undefined> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  let freeze: TimedCall | undefined;
  let snap: TimedCall | undefined;
  let thaw: TimedCall | undefined;
  let preFlush: PreFlushResult | undefined;
  for (const e of history.events ?? []) {
    // Local-activity markers (`core_local_activity`) carry the activity's return value in `result`.
    const payloads = e.markerRecordedEventAttributes?.details?.result?.payloads;
    if (!payloads?.length) continue;
    let value: unknown;
    try {
      value = defaultPayloadConverter.fromPayload(payloads[0]!);
    } catch {
      continue;
    }
    const v = value as { frozenFilesystems?: number; thawedFilesystems?: number; perDiskMs?: object; startedAt?: number; returnedAt?: number; thawedAt?: number; preFlush?: PreFlushResult };
    if (!v?.startedAt || !v.returnedAt) continue;
    // As the result's window (src/model/snapshot-result.ts): the thaw ends at the thaw call's return.
    const call = { startedAt: v.startedAt, returnedAt: v.thawedAt ?? v.returnedAt };
    if (typeof v.frozenFilesystems === 'number' && !freeze) {
      freeze = call;
      preFlush = v.preFlush;
    }
    if (v.perDiskMs && freeze) snap ??= call;
    if (typeof v.thawedFilesystems === 'number' && snap) thaw ??= call;
  }
  if (!freeze || !snap || !thaw) return undefined;
  const b = windowBreakdown([['freeze', freeze], ['snapshot', snap], ['thaw', thaw]]);
  return {
    freezeStartMs: freeze.startedAt,
    thawReturnMs: thaw.returnedAt,
    freezeToSnapshotMs: b.between['freeze→snapshot'],
    snapshotToThawMs: b.between['snapshot→thaw'],
    ...(preFlush ? { preFlush } : {}),
  };
}

export function vmsnapContender(ctx: LabContext, client: Client, taskQueue: string): Contender {
  return {
    name: 'vmsnap',
    async run(guest: Guest): Promise<RunTiming> {
      const run = await runSnapshotWorkflow(client, taskQueue, { domain: guest.name, quiesce: 'require', target: { clone: false } });
      const r = run.result;
      try {
        if (r.freezeWindowMs === null || !r.quiesced) throw new Error(`vmsnap run of ${guest.name} was not quiesced: ${r.quiesceReason}`);
        const abs = await windowFromHistory(client, r.workflowId).catch(() => undefined);
        const b = r.freezeBreakdownMs ?? { freeze: 0, snapshot: 0, thaw: 0, gaps: 0 };
        return {
          freezeStartMs: abs?.freezeStartMs ?? run.startMs,
          thawReturnMs: abs?.thawReturnMs ?? run.endMs,
          hostWindowMs: r.freezeWindowMs,
          breakdown: {
            freeze: b.freeze,
            snapshot: b.snapshot,
            thaw: b.thaw,
            gaps: b.gaps,
            ...(abs?.freezeToSnapshotMs !== undefined ? { 'gap freeze→snap': abs.freezeToSnapshotMs } : {}),
            ...(abs?.snapshotToThawMs !== undefined ? { 'gap snap→thaw': abs.snapshotToThawMs } : {}),
          },
          ...(abs ? {} : { probeFromMs: run.startMs, probeToMs: run.endMs }),
          extra: { workflowId: r.workflowId, e2eMs: run.e2eMs, stepsMs: r.stepsMs, windowFromHistory: !!abs, ...(abs?.preFlush ? { preFlush: abs.preFlush } : {}) },
        };
      } finally {
        await removeKeptSnapshots(ctx, r);
      }
    },
  };
}
