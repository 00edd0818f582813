import { execFile } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import type { SnapshotRequest } from '../../src/model/input';
import type { SnapshotResult } from '../../src/model/types';
import { lockWorkflowId } from '../../src/model/naming';
import { SA } from '../../src/model/search-attributes';
import { longestGap, readTicks, snapshotFsState } from '../../support/lab/probe';
import { CephView } from '../helpers/ceph-inspect';
import { ensureThawed, freezeStatus } from '../helpers/guest';
import { uniqueId } from '../helpers/harness';
import { labVars, need } from '../../support/lab/env';
import { sleep, WorkerProcess } from '../helpers/worker-process';
import { failureOf } from '../helpers/failure-of';
import { turnsHeldBy } from '../helpers/limit-turns';
import { extendedIt, repetitions } from '../helpers/lanes';

/*
 * Operators retry runs the Temporal way: Reset (Web UI button or `temporal workflow reset`). Each
 * cell resets a real run at one kind of point, with the Temporal CLI an operator would use, and
 * checks on the real system: the new run COMPLETED, its `quiesced` matches the ext4 state of every
 * image it reports (the truth oracle: a snapshot taken unfrozen needs journal recovery), the guest
 * is thawed and was never frozen past the deadline + 2 s, no snapshot or image is left beside the
 * result, and no lock workflow is left running.
 */

const run = promisify(execFile);
const RUNS = repetitions(process.env.VMSNAP_FAULT_RUNS, 1, 3);
const DEADLINE_MS = 15_000;
const PAUSE_MS = 3000;

const vars = labVars();
const ceph = new CephView(vars);
let client: Client;
let worker: WorkerProcess;

beforeAll(async () => {
  client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }) });
  // One worker for the file: every freeze pauses PAUSE_MS after the freeze call returned (so a
  // reset can land while the guest is frozen); flatten progress only drops a marker.
  worker = new WorkerProcess(vars, `reset-${uniqueId('h').slice(2)}`);
  await worker.start({ points: ['freeze:after', 'flatten:progress'], pauseMs: PAUSE_MS });
});

afterAll(async () => {
  await worker?.stop();
  for (const g of ['VMSNAP_GUEST_1DISK', 'VMSNAP_GUEST_3DISK']) await ensureThawed(vars, need(vars, g));
  await client?.connection.close();
});

const input = (domain: string, extra: Partial<SnapshotRequest> = {}): SnapshotRequest => ({
  domain,
  quiesce: 'require',
  freezeDeadlineMs: DEADLINE_MS,
  agentTimeoutSec: 3,
  snapshotTimeoutMs: 5000,
  ...extra,
});

/** `temporal workflow reset`, exactly as an operator types it; returns the new run's handle. */
async function reset(workflowId: string, to: { type: 'FirstWorkflowTask' | 'LastWorkflowTask' } | { eventId: number }): Promise<{ handle: WorkflowHandle; eventId: number }> {
  const before = (await client.workflow.getHandle(workflowId).describe()).runId;
  const point = 'type' in to ? ['--type', to.type] : ['--event-id', String(to.eventId)];
  const { stdout } = await run(
    need(vars, 'TEMPORAL_BIN'),
    ['workflow', 'reset', '--address', need(vars, 'TEMPORAL_ADDRESS'), '-w', workflowId, ...point, '--reason', 'operator retry (reset suite)'],
    { timeout: 30_000 },
  );
  const eventId = Number(/event ID (\d+)/.exec(stdout)?.[1] ?? NaN);
  const runId = (await client.workflow.getHandle(workflowId).describe()).runId;
  expect(runId).not.toBe(before);
  return { handle: client.workflow.getHandle(workflowId, runId), eventId };
}

/**
 * The WorkflowTaskCompleted event of the task that ran checkTargets: the last reset point before
 * the freeze. checkTargets is a local activity (a marker, recorded by that task) since
 * vmsnap-fewer-round-trips; a server-tracked activity (scheduled by it) before.
 */
async function beforeFreezePoint(handle: WorkflowHandle): Promise<number> {
  const history = await handle.fetchHistory();
  for (const e of history.events!) {
    if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'checkTargets') return Number(e.activityTaskScheduledEventAttributes.workflowTaskCompletedEventId);
    const marker = e.markerRecordedEventAttributes;
    const data = marker?.markerName === 'core_local_activity' ? marker.details?.data?.payloads?.[0]?.data : undefined;
    if (data && (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type?: string }).activity_type === 'checkTargets') {
      return Number(marker!.workflowTaskCompletedEventId);
    }
  }
  throw new Error(`no checkTargets in ${handle.workflowId}'s history`);
}

function clearMarkers(): void {
  for (const f of readdirSync(worker.faultDir)) rmSync(path.join(worker.faultDir, f), { force: true });
}

async function start(domain: string, extra: Partial<SnapshotRequest> = {}): Promise<WorkflowHandle> {
  clearMarkers();
  return client.workflow.start('consistentSnapshot', {
    taskQueue: worker.taskQueue,
    workflowId: uniqueId('reset'),
    args: [input(domain, extra)],
    workflowExecutionTimeout: '5m',
  });
}

async function quiescedAttr(handle: WorkflowHandle): Promise<boolean | undefined> {
  return (await handle.describe()).typedSearchAttributes.get(SA.quiesced);
}

/** ext4 state of every disk of a result: each image's `snap`, or the kept source snapshot. */
async function fsStates(result: SnapshotResult): Promise<string[]> {
  const out: string[] = [];
  for (const d of result.disks) {
    const [pool, image, snap] = d.image ? [...d.image.split('/'), 'snap'] : [...d.snapshot.split('@')[0].split('/'), d.snapshot.split('@')[1]];
    out.push(await snapshotFsState({ cephConf: need(vars, 'CEPH_CONF'), id: 'admin', keyring: need(vars, 'CEPH_KEYRING'), pool, image, snap }));
  }
  return out;
}

/** Snapshots of this run's name on the guest's disks, and images of this id that are not the result's. */
async function leftovers(domain: string, workflowId: string, result: SnapshotResult): Promise<string[]> {
  const out: string[] = [];
  const kept = new Set(result.disks.filter((d) => !d.image).map((d) => d.snapshot));
  for (const img of (await ceph.images('vms')).filter((i) => i.startsWith(`${domain}-`))) {
    for (const s of await ceph.vmsnapSnaps('vms', img)) if (s === `vmsnap-${workflowId}` && !kept.has(`vms/${img}@${s}`)) out.push(`vms/${img}@${s}`);
  }
  const owned = new Set(result.disks.map((d) => d.image?.split('/')[1]));
  for (const img of (await ceph.images('images')).filter((i) => i.includes(workflowId))) if (!owned.has(img)) out.push(`images/${img}`);
  return out;
}

async function removeKept(result: SnapshotResult): Promise<void> {
  for (const d of result.disks.filter((x) => !x.image)) {
    const [spec, snap] = d.snapshot.split('@');
    await ceph.rbd('snap', 'rm', `${spec}@${snap}`).catch(() => undefined);
    for (const k of [`vmsnap.done.${snap}`, `vmsnap.snap-owner.${snap}`]) await ceph.rbd('image-meta', 'remove', spec, k).catch(() => undefined);
  }
}

/**
 * The checks every cell ends with, on the run a reset produced. Returns its result.
 */
async function truthful(domain: string, handle: WorkflowHandle, since: number): Promise<SnapshotResult> {
  const result = (await handle.result()) as SnapshotResult;
  expect((await handle.describe()).status.name).toBe('COMPLETED');
  const states = await fsStates(result);
  expect(result.quiesced, `quiesced=${result.quiesced} (${result.quiesceReason}) but ext4: ${states.join(',')}`).toBe(states.every((s) => s === 'clean'));
  expect(await quiescedAttr(handle)).toBe(result.quiesced);
  expect(await freezeStatus(vars, domain)).toBe('thawed');
  const gap = longestGap(await readTicks(domain, since - 1000), since, Date.now());
  expect(gap?.ms ?? 0, 'longest probe stall').toBeLessThanOrEqual(DEADLINE_MS + 2000);
  let left = await leftovers(domain, handle.workflowId, result);
  // A terminated run's leftovers are the orphan reaper's (every 2 s in the test worker).
  for (let i = 0; i < 20 && left.length; i++) {
    await sleep(500);
    left = await leftovers(domain, handle.workflowId, result);
  }
  expect(left).toEqual([]);
  // The lock (a limit since vmsnap-one-mutex) ends once it has read the release signal, which the
  // run waited to be delivered, not read: a moment after the run's end.
  let lock = await client.workflow.getHandle(lockWorkflowId(result.domain.uuid)).describe();
  for (let i = 0; i < 20 && lock.status.name === 'RUNNING'; i++) {
    await sleep(250);
    lock = await client.workflow.getHandle(lockWorkflowId(result.domain.uuid)).describe();
  }
  expect(lock.status.name).not.toBe('RUNNING');
  // Nor a turn of a fleet limit: the new run's request replaces the replaced run's.
  let held = await turnsHeldBy(client, handle.workflowId);
  for (let i = 0; i < 10 && held.length; i++) {
    await sleep(500);
    held = await turnsHeldBy(client, handle.workflowId);
  }
  expect(held, 'turns still held').toEqual([]);
  return result;
}

async function cell(body: () => Promise<void>): Promise<void> {
  for (let i = 0; i < RUNS; i++) {
    try {
      await body();
    } finally {
      for (const g of ['VMSNAP_GUEST_1DISK', 'VMSNAP_GUEST_3DISK']) await ensureThawed(vars, need(vars, g));
    }
  }
}

describe.each([
  // While frozen: g1 resets to the last workflow task (the lock is kept), g3 to the first (the
  // new run takes its own id's lock back from the replaced run).
  ['vmsnap-g1', 'VMSNAP_GUEST_1DISK', 'LastWorkflowTask'],
  ['vmsnap-g3', 'VMSNAP_GUEST_3DISK', 'FirstWorkflowTask'],
] as const)('Reset of a %s run', (_name, key, frozenPoint) => {
  const domain = () => need(vars, key);
  // Both Reset points of a frozen run in the default lane (they take the lock differently); the
  // completed-run and copy cases once there (g1), for g3 too in the extended lane.
  const each = key === 'VMSNAP_GUEST_1DISK' ? it : extendedIt;

  each('to the first and to the last workflow task of a completed run: the same truth as the original', () =>
    cell(async () => {
      const since = Date.now();
      const first = await start(domain());
      const original = (await first.result()) as SnapshotResult;
      expect(original.quiesced).toBe(true);
      const originalAttr = await quiescedAttr(first);
      try {
        const viaFirst = await reset(first.workflowId, { type: 'FirstWorkflowTask' });
        const again = await truthful(domain(), viaFirst.handle, since);
        expect(again.reusedExisting).toBe(true);
        expect({ q: again.quiesced, n: again.frozenFilesystems, at: again.frozenAt }).toEqual({ q: original.quiesced, n: original.frozenFilesystems, at: original.frozenAt });
        expect(await quiescedAttr(viaFirst.handle)).toBe(originalAttr);
        expect(again.disks.map((d) => d.image)).toEqual(original.disks.map((d) => d.image));

        const viaLast = await reset(first.workflowId, { type: 'LastWorkflowTask' });
        const last = await truthful(domain(), viaLast.handle, since);
        expect({ q: last.quiesced, n: last.frozenFilesystems, at: last.frozenAt }).toEqual({ q: original.quiesced, n: original.frozenFilesystems, at: original.frozenAt });
        expect(await quiescedAttr(viaLast.handle)).toBe(originalAttr);
      } finally {
        await ceph.removeResultImages(original);
      }
    }));

  /** Start a run, wait for `at`, reset it to `to`, check the new run; `fresh`: it froze again itself. */
  const resetDuring = (at: 'freeze:after' | 'flatten:progress', to: (h: WorkflowHandle) => Promise<Parameters<typeof reset>[1]>, freshFreeze: boolean) =>
    cell(async () => {
      const since = Date.now();
      let fresh = freshFreeze;
      const h = await start(domain());
      await worker.reached(at);
      if (at === 'freeze:after') expect(await freezeStatus(vars, domain())).toBe('frozen');
      const point = await to(h);
      const resetAt = Date.now();
      const { handle } = await reset(h.workflowId, point);
      const result = await truthful(domain(), handle, since);
      try {
        expect(result.quiesced).toBe(true);
        // The replaced run's own copy activities go on after a reset; when they finish first,
        // the new run reuses their images (and reports their recorded freeze) instead.
        if (result.reusedExisting) fresh = false;
        // The result's freeze is the new run's own (after the reset), or the replaced run's one.
        if (fresh) expect(Date.parse(result.frozenAt!)).toBeGreaterThan(resetAt);
        else expect(Date.parse(result.frozenAt!)).toBeLessThan(resetAt);
      } finally {
        await ceph.removeResultImages(result);
      }
    });

  it(`while the guest is frozen (to ${frozenPoint}, before the window): thaws the old freeze, freezes afresh`, () =>
    resetDuring('freeze:after', async () => ({ type: frozenPoint }), true));

  each('during the copy, to the point before the freeze: freezes afresh, one set of images', () =>
    resetDuring('flatten:progress', async (h) => ({ eventId: await beforeFreezePoint(h) }), true));

  each('during the copy, to the last workflow task (after the window): redoes the copy under the same names', () =>
    resetDuring('flatten:progress', async () => ({ type: 'LastWorkflowTask' }), false));
});

describe('Reset of a snapshot-only run', () => {
  it('to the first workflow task: the kept snapshot is reused and reported as recorded', () =>
    cell(async () => {
      const since = Date.now();
      const domain = need(vars, 'VMSNAP_GUEST_1DISK');
      const first = await start(domain, { target: { clone: false } });
      const original = (await first.result()) as SnapshotResult;
      try {
        const { handle } = await reset(first.workflowId, { type: 'FirstWorkflowTask' });
        const again = await truthful(domain, handle, since);
        expect(again.reusedExisting).toBe(true);
        expect({ q: again.quiesced, n: again.frozenFilesystems, at: again.frozenAt }).toEqual({ q: true, n: original.frozenFilesystems, at: original.frozenAt });
      } finally {
        await removeKept(original);
      }
    }));
});

describe('a Reset whose new run fails before the lock', () => {
  // Issue 25 #6 on the lab: the replaced run's lock goes on after a Reset; when the new run fails
  // before it takes the lock back (here: the guest is paused, so its inspect fails), the next run
  // of the VM asks the lock to check its holder, which is closed, and the lock lets go.
  it('the next run of that VM is not DomainBusy: it COMPLETED, quiesced, and leaves no lock running', () =>
    cell(async () => {
      const domain = need(vars, 'VMSNAP_GUEST_3DISK');
      const uuid = (await run('virsh', ['-q', '-c', need(vars, 'LIBVIRT_DEFAULT_URI'), 'domuuid', domain])).stdout.trim();
      const h = await start(domain);
      await worker.reached('flatten:progress'); // past the window, in the copy: the lock is held
      await run('virsh', ['-q', '-c', need(vars, 'LIBVIRT_DEFAULT_URI'), 'suspend', domain]);
      let paused = true;
      const resume = async () => {
        if (paused) await run('virsh', ['-q', '-c', need(vars, 'LIBVIRT_DEFAULT_URI'), 'resume', domain]);
        paused = false;
      };
      try {
        const { handle } = await reset(h.workflowId, { type: 'FirstWorkflowTask' });
        const f = await failureOf(handle.result());
        expect(f.type).toBe('DomainNotRunning');
        expect((await client.workflow.getHandle(lockWorkflowId(uuid)).describe()).status.name, 'the lock the replaced run left').toBe('RUNNING');
        await resume();
        const since = Date.now();
        const next = await start(domain);
        const result = await truthful(domain, next, since);
        try {
          expect(result.quiesced).toBe(true);
        } finally {
          await ceph.removeResultImages(result);
        }
      } finally {
        await resume();
      }
    }));
});
