import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowFailedError } from '@temporalio/client';
import type { SnapshotRequest } from '../../src/model/input';
import { runKeyFor, sourceSnapName } from '../../src/model/naming';
import type { SnapshotResult } from '../../src/model/types';
import { labQemuPid } from '../../support/lab/guest-ctl';
import { readTicks } from '../../support/lab/probe';
import { CephView } from '../helpers/ceph-inspect';
import { ensureThawed } from '../helpers/guest';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { labVars, need } from '../../support/lab/env';

/*
 * A VM whose QEMU (its disks' exclusive-lock owner) stops answering for 40 s — past librbd's
 * ~30 s watch timeout, after which librbd would break its lock and blocklist it — across the
 * whole prepare → snapshot → compensation of a run. Meanwhile another VM is snapshotted
 * back to back. Real worker (restricted client.vmsnap key), real guests, real Temporal.
 */

const run = promisify(execFile);
const vars = labVars();
const ceph = new CephView(vars);
const G1 = need(vars, 'VMSNAP_GUEST_1DISK');
const G3 = need(vars, 'VMSNAP_GUEST_3DISK');
const STALL_MS = 40_000;
// Past the stall plus the seconds a resumed QEMU needs to carry out a queued snapshot request.
const HORIZON_MS = 55_000;
let h: Harness;

beforeAll(async () => {
  // A short reap interval so leftovers go within the test; the horizon outlasts the stall.
  h = await startHarness({ config: { reapIntervalMs: 2000, ownerRecordHorizonMs: HORIZON_MS } });
});

afterAll(async () => {
  await h?.stop();
  await ensureThawed(vars, G1);
  await ensureThawed(vars, G3);
});

async function lockOwner(spec: string): Promise<string> {
  const locks = JSON.parse(await ceph.rbd('lock', 'ls', '--format', 'json', spec)) as { address: string }[] | Record<string, { address: string }>;
  return (Array.isArray(locks) ? locks : Object.values(locks))[0]?.address ?? '';
}

async function blocklisted(): Promise<string> {
  const { stdout } = await run('ceph', ['-c', need(vars, 'CEPH_CONF'), '--id', 'admin', 'osd', 'blocklist', 'ls']);
  return stdout;
}

function start(domain: string, input: Partial<SnapshotRequest>) {
  return h.client.workflow.start('consistentSnapshot', {
    taskQueue: h.hw.taskQueue,
    workflowId: uniqueId(`stall-${domain}`),
    args: [{ domain, target: { clone: false }, ...input } as SnapshotRequest],
    workflowExecutionTimeout: '5m',
  });
}

/** A snapshot-only run of g3; its kept snapshots and records are removed at once. */
async function snapshotG3(): Promise<SnapshotResult> {
  const handle = await start(G3, { quiesce: 'require' });
  try {
    return (await handle.result()) as SnapshotResult;
  } finally {
    const snap = sourceSnapName(runKeyFor(handle.workflowId));
    for (const disk of ['vdb', 'vdc', 'vdd']) {
      await ceph.rbd('snap', 'rm', `vms/${G3}-${disk}@${snap}`).catch(() => undefined);
      await ceph.dropOwnerRecord('vms', `${G3}-${disk}@${snap}`);
    }
  }
}

describe('an unresponsive lock owner (QEMU SIGSTOPped 40 s)', () => {
  it('g1 stalled across prepare → snapshot → compensation is never blocklisted, its writes resume, nothing of the run is left; g3 snapshotted meanwhile stays quiesced within its usual window', async () => {
    const usual = [await snapshotG3(), await snapshotG3()];
    for (const r of usual) expect(r.quiesced).toBe(true);
    const usualMs = Math.max(...usual.map((r) => r.freezeWindowMs!));

    const g1Disk = `vms/${G1}-vdb`;
    const owner = await lockOwner(g1Disk);
    expect(owner).toMatch(/:/);
    const pid = labQemuPid(need(vars, 'LIBVIRT_LAB_DIR'), G1);
    const stoppedAt = Date.now();
    process.kill(pid, 'SIGSTOP');
    let g1: Awaited<ReturnType<typeof start>>;
    const during: SnapshotResult[] = [];
    let g1Failure: string | undefined;
    let resumedAt: number;
    try {
      // quiesce skip: a stopped QEMU's agent cannot answer; the run goes straight to prepare.
      g1 = await start(G1, { quiesce: 'skip', snapshotTimeoutMs: 5000, lateSnapshotWatchMs: 8000 });
      const g1Done = g1.result().then(
        () => 'completed',
        (err: WorkflowFailedError) => {
          let c: unknown = err.cause;
          while (c && !(c as { type?: string }).type) c = (c as { cause?: unknown }).cause;
          return (c as { type?: string } | undefined)?.type ?? String(err);
        },
      );
      while (Date.now() - stoppedAt < STALL_MS - 8000 || !during.length) during.push(await snapshotG3());
      g1Failure = await g1Done;
      await new Promise((r) => setTimeout(r, Math.max(0, stoppedAt + STALL_MS - Date.now())));
    } finally {
      process.kill(pid, 'SIGCONT');
      resumedAt = Date.now();
    }
    const g1Id = g1!.workflowId;
    const snap = sourceSnapName(runKeyFor(g1Id));

    // g1's run failed in its bound, truthfully.
    expect(g1Failure).toBe('SnapshotTimeout');
    // g3: every run during g1's stall was quiesced, with its usual window.
    expect(during.length).toBeGreaterThanOrEqual(1);
    for (const r of during) {
      expect(r.quiesced).toBe(true);
      expect(r.freezeWindowMs!).toBeLessThanOrEqual(Math.max(2 * usualMs, usualMs + 1000));
    }

    // g1's writes resume.
    await new Promise((r) => setTimeout(r, 3000));
    expect((await readTicks(G1, resumedAt)).length).toBeGreaterThan(3);

    // Nothing of the run is left once the late snapshot (if any) has been reaped.
    let lateSeen = false;
    let left: string[] = [];
    const key = `${G1}-vdb@${snap}`;
    for (let t0 = Date.now(); Date.now() - t0 < 90_000; ) {
      const snaps = (await ceph.vmsnapSnaps('vms', `${G1}-vdb`)).filter((s) => s === snap);
      if (snaps.length) lateSeen = true;
      const records = (await ceph.ownerRecordKeys('vms')).filter((k) => k === key);
      left = [...snaps.map((s) => `${g1Disk}@${s}`), ...records.map((k) => `owner record ${k}`)];
      if (!left.length && (lateSeen || Date.now() - stoppedAt > HORIZON_MS)) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    // Its QEMU was never blocklisted: no call broke its lock.
    expect(await blocklisted()).not.toContain(owner);
    console.log(
      `[live-image-stall] g1 ${g1Failure}; late snapshot ${lateSeen ? 'landed after SIGCONT and was reaped' : 'never landed'}; ` +
        `g3 usual window ${usualMs.toFixed(0)} ms, during the stall ${during.map((r) => r.freezeWindowMs!.toFixed(0)).join('/')} ms`,
    );
    expect(left).toEqual([]);
  }, 300_000);
});
