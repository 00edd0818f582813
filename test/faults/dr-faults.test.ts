import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIRROR_CHECK_TIMEOUT_MS, MIRROR_LOOK_TIMEOUT_MS } from '../../activities/mirror';
import { releaseFaultPoint } from '../../src/host/fault-points';
import type { SnapshotRequest } from '../../src/model/input';
import { DR_POINT_PREFIX } from '../../src/model/dr-point';
import { runKeyFor, sourceSnapName } from '../../src/model/naming';
import type { SnapshotResult } from '../../src/model/types';
import { rbd, run } from '../../support/lab/cli-tools';
import { drRbd, drSiteUp } from '../../support/lab/dr';
import { labVars, loadLabEnv, need, type LabDrEnv } from '../../support/lab/env';
import { startScratchGuest, type ScratchGuest } from '../../support/lab/scratch-guest';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { failureOf } from '../helpers/failure-of';
import { ensureThawed, freezeStatus } from '../helpers/guest';
import { uniqueId } from '../helpers/harness';
import { extendedDescribe, extendedIt } from '../helpers/lanes';
import { until } from '../helpers/until';
import { WorkerProcess, sleep } from '../helpers/worker-process';

/*
 * DR mode (docs/dr.md) when the DR side fails, and `vmsnap doctor`'s DR checks, on the real lab: a
 * 1-disk guest of the test's own whose disk `vmsnap mirror enable` made mirror to the DR site
 * (lab/dr.sh), snapshotted by a host worker of its own (a process, so that a cell can SIGKILL it).
 * The DR site's daemons are stopped and started by their pid files, as lab/dr.sh starts them;
 * every cell leaves the DR site up, later files depend on it.
 */
const env = loadLabEnv();
if (!env.guests) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);
const vars = labVars();
const ROOT = path.resolve(__dirname, '../..');

let dr: LabDrEnv;
let guest: ScratchGuest;
let cli: NodeJS.ProcessEnv;
let w: WorkerProcess;
let client: Client;
const image = () => `${guest.name}-vdb`;

/** Where a DR run stops after its DR point record, before its mirror snapshots: a cell acts there. */
const MIRROR_POINT = 'mirror:before-snapshots';
/** A point stalls until the cell releases it (or kills the worker); a forgotten one ends by itself. */
const STALL_MS = 60_000;

type Doctor = { ok: boolean; checks: { name: string; status: string; detail: string; fix?: string }[] };
const drLines = (d: Doctor) => d.checks.filter((c) => c.name.startsWith('dr '));

beforeAll(async () => {
  const t0 = performance.now();
  dr = await drSiteUp();
  const drConfig = { VMSNAP_DR_CEPH_CONF: dr.conf, VMSNAP_DR_CEPH_ID: dr.vmsnapId, VMSNAP_DR_CEPH_KEYRING: dr.vmsnapKeyring };
  cli = cliEnv(vars, drConfig);
  guest = await startScratchGuest(env, env.guests!.oneDisk, { disks: 1 });
  const on = await vmsnapCli(['mirror', 'enable', guest.name, '--json'], cli);
  if (on.code !== 0) throw new Error(`mirror enable: ${on.stderr}`);
  w = new WorkerProcess(vars, `drf-${uniqueId('h').slice(2)}`, drConfig);
  await w.start({ points: [MIRROR_POINT], pauseMs: STALL_MS });
  client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }) });
  console.log(`[dr-faults] DR site up, scratch guest ${guest.name} mirrored, worker up: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
});

afterAll(async () => {
  // A cell cut short between its partition and its heal (a test timeout) must not leave the DR site stopped.
  if (['mon.a.pid', 'osd.0.pid'].some((f) => stopped(f))) await healDrSite();
  await w?.stop();
  await client?.connection.close();
  if (guest) {
    await ensureThawed(vars, guest.name);
    await rbd(env, ['mirror', 'image', 'disable', `${env.pools.vm}/${image()}`]).catch(() => undefined);
  }
  await guest?.remove();
});

// ---- the DR site's daemons, by the pid files lab/dr.sh and lab/ceph.sh write ----

const drRunDir = (file: string) => path.join(env.dir, 'ceph-dr', 'run', file);
const pidOf = (file: string) => Number(readFileSync(drRunDir(file), 'utf8').trim());
/** The process is SIGSTOPped (state T in /proc/PID/stat). */
const stopped = (file: string) => {
  try {
    return /^\d+ \(.*\) T /.test(readFileSync(`/proc/${pidOf(file)}/stat`, 'utf8'));
  } catch {
    return false;
  }
};
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function killRbdMirror(): Promise<void> {
  const pid = pidOf('client.rbd-mirror.a.pid');
  process.kill(pid, 'SIGKILL');
  await until('rbd-mirror to die', async () => !alive(pid), 10_000, 100);
}

/** `lab/dr.sh up`: starts rbd-mirror again when it is not running and waits until it registered. */
async function restartRbdMirror(): Promise<number> {
  const t0 = performance.now();
  await drSiteUp();
  return performance.now() - t0;
}

/** The DR cluster stops answering anyone (a partition): its mon and its OSD SIGSTOPped. */
function partitionDrSite(): void {
  for (const f of ['mon.a.pid', 'osd.0.pid']) process.kill(pidOf(f), 'SIGSTOP');
}

/** `lab/ceph.sh SUB` on the DR cluster. */
const drCephSh = (sub: string) => run('env', ['CEPH_INSTANCE=dr', 'bash', path.join(ROOT, 'lab', 'ceph.sh'), sub], 120_000);

/**
 * The DR site back: SIGCONT, then the OSD restarted. A single-OSD PG of Pacific that stalled past
 * its read lease stays "waiting for readable" after SIGCONT (measured: still so 228 s later; a
 * restart serves I/O in ~1.5 s), which no real DR site has once its network is back. Then
 * `lab/dr.sh up`, which waits for rbd I/O and rbd-mirror. Returns how long that took.
 */
async function healDrSite(): Promise<number> {
  const t0 = performance.now();
  for (const f of ['mon.a.pid', 'osd.0.pid']) {
    try {
      process.kill(pidOf(f), 'SIGCONT');
    } catch {
      // not running: ceph.sh and dr.sh below start what is missing
    }
  }
  await drCephSh('kill-osd').catch(() => undefined); // start-osd and dr.sh up say what is wrong
  await drCephSh('start-osd');
  await drSiteUp();
  return performance.now() - t0;
}

interface Snap {
  id: number;
  name: string;
  namespace: { type: string; state?: string; complete?: boolean; primary_snap_id?: number };
}

const snapsOf = async (cmd: Promise<{ stdout: string }>) => JSON.parse((await cmd).stdout) as Snap[];
const localSnaps = () => snapsOf(rbd(env, ['snap', 'ls', '--all', `${env.pools.vm}/${image()}`, '--format', 'json']));
const drSnaps = () => snapsOf(drRbd(dr, ['snap', 'ls', '--all', `${dr.pool}/${image()}`, '--format', 'json'], 30_000));
const userNames = (s: Snap[]) => s.filter((x) => x.namespace.type === 'user').map((x) => x.name);
const mirrorIds = (s: Snap[]) => s.filter((x) => x.namespace.type === 'mirror').map((x) => x.id);
const drPointKeys = async () => {
  const out = (await drRbd(dr, ['image-meta', 'list', '--format', 'json', `${dr.pool}/${image()}`], 30_000)).stdout.trim();
  return Object.keys(out ? (JSON.parse(out) as Record<string, string>) : {}).filter((k) => k.startsWith(DR_POINT_PREFIX));
};
const snapOfRun = (workflowId: string) => sourceSnapName(runKeyFor(workflowId));

const drRequest = (waitMs: number, extra: Partial<SnapshotRequest> = {}): SnapshotRequest => ({
  domain: guest.name,
  quiesce: 'require',
  target: { clone: false, mirror: { waitMs } },
  ...extra,
});

/**
 * Lets every DR run of `handle` through the mirror point (each attempt of its mirror step stops
 * there), calling `atPoint` the first time, until the run ends.
 */
function passMirrorPoint(handle: WorkflowHandle, atPoint?: () => void | Promise<void>): { outcome: Promise<SnapshotResult | WorkflowFailedError>; reachedAt: () => number } {
  const marker = path.join(w.faultDir, MIRROR_POINT.replace(':', '_'));
  let done = false;
  let reachedAt = 0;
  const outcome = handle.result().then(
    (r) => r as SnapshotResult,
    (e: unknown) => {
      if (e instanceof WorkflowFailedError) return e;
      throw e;
    },
  );
  const gate = (async () => {
    while (!done) {
      if (existsSync(marker) && !existsSync(`${marker}.release`)) {
        if (!reachedAt) {
          reachedAt = Date.now();
          await atPoint?.();
        }
        releaseFaultPoint(w.faultDir, MIRROR_POINT);
      }
      await sleep(20);
    }
  })();
  return {
    outcome: outcome.finally(async () => {
      done = true;
      await gate;
    }),
    reachedAt: () => reachedAt,
  };
}

async function startRun(request: SnapshotRequest): Promise<WorkflowHandle> {
  rmSync(path.join(w.faultDir, MIRROR_POINT.replace(':', '_')), { force: true });
  return client.workflow.start('consistentSnapshot', { taskQueue: w.taskQueue, workflowId: uniqueId('drf'), args: [request], workflowExecutionTimeout: '10m' });
}

/**
 * A DR run that must succeed, and its point really on the DR site: its own mirror snapshot, newer
 * than every mirror snapshot the image had before it (a leftover of a failed run included), and
 * its own snapshot carried by it. Its snapshot is removed here afterwards. `backAt`: the DR site
 * has just come back from an outage; the worker's session there lags behind it for a while
 * (docs/dr.md#when-the-dr-side-fails), and a run that meets that lag fails MirrorUnavailable at its
 * check, before anything is frozen: such runs are started again for up to a minute, and counted.
 */
async function drRunSucceeds(label: string, backAt?: number): Promise<SnapshotResult> {
  const mirrorBefore = mirrorIds(await localSnaps());
  let refused = 0;
  for (;;) {
    const t0 = Date.now();
    const handle = await startRun(drRequest(120_000));
    const r = await passMirrorPoint(handle).outcome;
    if (r instanceof WorkflowFailedError) {
      const f = await failureOf(Promise.reject(r));
      if (backAt && f.type === 'MirrorUnavailable' && f.message.includes('nothing was frozen') && Date.now() - backAt < 60_000) {
        refused++;
        continue;
      }
      throw new Error(`${label}: the DR run failed ${f.type}: ${f.message}`);
    }
    const d = r.mirror!.disks[0]!;
    const lag = backAt ? `; ${refused} run(s) refused at the check before it, it started ${((t0 - backAt) / 1000).toFixed(1)} s after the DR site was back` : '';
    console.log(`[dr-faults] ${label}: a DR run finished in ${((Date.now() - t0) / 1000).toFixed(1)} s (its checks ${r.stepsMs.inspect ?? '?'} ms), RPO ${r.mirror!.rpoMs} ms, mirror snapshot ${d.mirrorSnapId} carried by ${d.carriedBy}${lag}`);
    expect(d.mirrorSnapId, `${label}: the run's mirror snapshot is a new one, not one the image had (${mirrorBefore.join(', ')})`).toBeGreaterThan(Math.max(0, ...mirrorBefore));
    expect(d.carriedBy, `${label}: the copy the run counts is its own mirror snapshot's or a later one's`).toBeGreaterThanOrEqual(d.mirrorSnapId);
    const there = await drSnaps();
    expect(userNames(there), `${label}: the point the run claims is on the DR site`).toContain(d.snapshot);
    const carrier = there.find((s) => s.id === d.drMirrorSnapId);
    expect(carrier?.namespace, `${label}: the DR site's copy the run counts is complete and of that mirror snapshot`).toMatchObject({ complete: true, primary_snap_id: d.carriedBy });
    await rbd(env, ['snap', 'rm', '--no-progress', `${env.pools.vm}/${image()}@${d.snapshot}`]);
    return r;
  }
}

describe('DR mode when the DR site is unreachable: bounded, typed, nothing left that a later run could take for its own', () => {
  it('the DR site partitioned (mon and OSD SIGSTOPped) after a run’s thaw, before its mirror snapshot: MirrorUnavailable within waitMs plus one look, the guest thawed, the run’s snapshot removed, its leftover mirror snapshot and record never taken for a later run’s; once the DR site is back a DR run succeeds', async () => {
    const waitMs = 6000;
    const before = await localSnaps();
    const handle = await startRun(drRequest(waitMs));
    let partitionedAt = 0;
    let o: SnapshotResult | WorkflowFailedError;
    let healMs: number;
    try {
      o = await passMirrorPoint(handle, () => {
        partitionDrSite();
        partitionedAt = Date.now();
      }).outcome;
    } finally {
      healMs = await healDrSite();
    }
    const backAt = Date.now();
    const endedAfter = (await handle.describe()).closeTime!.getTime() - partitionedAt;
    expect(partitionedAt, 'the run reached its mirror step').toBeGreaterThan(0);
    // Bounded: the mirror snapshot (a second here), waitMs, one look's bound; generous for this machine.
    expect(endedAfter, `the run ended ${endedAfter} ms after the partition`).toBeLessThan(waitMs + MIRROR_LOOK_TIMEOUT_MS + 20_000);
    expect(o, 'a run whose DR site did not answer must fail').toBeInstanceOf(WorkflowFailedError);
    const failure = await failureOf(Promise.reject(o));
    console.log(`[dr-faults] DR site partitioned: the run failed ${failure.type} ${endedAfter} ms after the partition (waitMs ${waitMs}); the DR site back in ${(healMs / 1000).toFixed(1)} s: ${failure.message}`);
    expect(failure).toMatchObject({ type: 'MirrorUnavailable', nonRetryable: true });
    expect(failure.message).toContain('did not answer');
    expect(await freezeStatus(vars, guest.name)).toBe('thawed');

    const after = await localSnaps();
    const failedSnap = snapOfRun(handle.workflowId);
    expect(userNames(after), 'the failed run leaves no snapshot of its own').not.toContain(failedSnap);
    expect(userNames(after).filter((n) => !userNames(before).includes(n)), 'nor any other new one').toEqual([]);
    const leftover = mirrorIds(after).filter((id) => !mirrorIds(before).includes(id));
    console.log(`[dr-faults] the failed run's mirror snapshot(s) left on the primary: ${leftover.join(', ') || 'none'}`);

    const r = await drRunSucceeds('after the DR site came back', backAt);
    for (const id of leftover) expect(r.mirror!.disks[0]!.mirrorSnapId).toBeGreaterThan(id);
    const there = await drSnaps();
    expect(userNames(there), 'the failed run’s snapshot never reached the DR site').not.toContain(failedSnap);
    const keys = await drPointKeys();
    expect(keys, 'the DR site holds the new run’s record').toContain(`${DR_POINT_PREFIX}${r.mirror!.disks[0]!.snapshot}`);
    expect(keys, 'and not the failed run’s, pruned by the new run and carried by its mirror snapshot').not.toContain(`${DR_POINT_PREFIX}${failedSnap}`);
  }, 300_000);

  extendedIt('the DR site partitioned before a run: MirrorUnavailable at the check before the freeze (one bounded round trip), nothing frozen or taken', async () => {
    const before = await localSnaps();
    let failure!: ApplicationFailure;
    let elapsed: number;
    let healMs: number;
    partitionDrSite();
    try {
      const t0 = Date.now();
      const handle = await startRun(drRequest(6000));
      const { outcome } = passMirrorPoint(handle);
      failure = await failureOf(outcome.then((r) => (r instanceof WorkflowFailedError ? Promise.reject(r) : r)));
      elapsed = Date.now() - t0;
    } finally {
      healMs = await healDrSite();
    }
    const backAt = Date.now();
    console.log(`[dr-faults] DR site partitioned before the run: failed ${failure.type} after ${elapsed} ms (DR site back in ${(healMs / 1000).toFixed(1)} s): ${failure.message}`);
    expect(failure).toMatchObject({ type: 'MirrorUnavailable', nonRetryable: true });
    expect(failure.message).toContain('nothing was frozen');
    expect(elapsed).toBeLessThan(MIRROR_CHECK_TIMEOUT_MS + 20_000);
    expect(await freezeStatus(vars, guest.name)).toBe('thawed');
    const after = await localSnaps();
    expect(after.map((s) => s.id)).toEqual(before.map((s) => s.id));
    await drRunSucceeds('after the DR site came back', backAt);
  }, 300_000);
});

extendedDescribe('DR mode when its rbd-mirror or its worker dies: never a replicated point that is not there', () => {
  extendedIt('rbd-mirror SIGKILLed as a DR run starts, restarted 10 s later: the run finishes with its snapshot on the DR site, or fails typed leaving nothing behind; the guest thawed', async () => {
    const before = await localSnaps();
    await killRbdMirror();
    const killedAt = Date.now();
    let restartMs = 0;
    try {
      const handle = await startRun(drRequest(120_000));
      const restarted = sleep(10_000).then(async () => {
        restartMs = await restartRbdMirror();
      });
      const { outcome } = passMirrorPoint(handle);
      const o = await outcome;
      await restarted;
      const tookMs = Date.now() - killedAt;
      expect(await freezeStatus(vars, guest.name)).toBe('thawed');
      const mine = userNames(await localSnaps()).filter((n) => !userNames(before).includes(n));
      if (o instanceof WorkflowFailedError) {
        const failure = await failureOf(Promise.reject(o));
        console.log(`[dr-faults] rbd-mirror killed: the run failed ${failure.type} ${(tookMs / 1000).toFixed(1)} s after the kill (rbd-mirror back in ${(restartMs / 1000).toFixed(1)} s): ${failure.message}`);
        expect(failure.type).toMatch(/^(SnapshotTimeout|MirrorNotReplicated|MirrorUnavailable)$/);
        expect(mine, 'a failed run leaves no snapshot a later run could mistake for its own').toEqual([]);
        expect(userNames(await drSnaps()), 'nor one on the DR site').not.toContain(snapOfRun(handle.workflowId));
      } else {
        console.log(`[dr-faults] rbd-mirror killed: the run finished ${(tookMs / 1000).toFixed(1)} s after the kill (rbd-mirror back in ${(restartMs / 1000).toFixed(1)} s), RPO ${o.mirror!.rpoMs} ms`);
        expect(o.mirror!.disks[0]!.snapshot).toBe(mine[0]);
        expect(userNames(await drSnaps()), 'the point the run claims is on the DR site').toContain(mine[0]);
        await rbd(env, ['snap', 'rm', '--no-progress', `${env.pools.vm}/${image()}@${mine[0]}`]);
      }
    } finally {
      await restartRbdMirror();
    }
    await drRunSucceeds('after rbd-mirror came back');
  }, 300_000);

  extendedIt('rbd-mirror SIGKILLed during a DR run’s replication (after its thaw, before its mirror snapshot), restarted 10 s later: the run finishes with its point on the DR site, or fails typed leaving nothing there', async () => {
    const before = await localSnaps();
    let restartMs = 0;
    let killedAt = 0;
    let restarted: Promise<void> = Promise.resolve();
    try {
      const handle = await startRun(drRequest(120_000));
      const { outcome } = passMirrorPoint(handle, async () => {
        await killRbdMirror();
        killedAt = Date.now();
        restarted = sleep(10_000).then(async () => {
          restartMs = await restartRbdMirror();
        });
      });
      const o = await outcome;
      await restarted;
      const tookMs = Date.now() - killedAt;
      expect(killedAt, 'the run reached its mirror step').toBeGreaterThan(0);
      expect(await freezeStatus(vars, guest.name)).toBe('thawed');
      const mine = userNames(await localSnaps()).filter((n) => !userNames(before).includes(n));
      if (o instanceof WorkflowFailedError) {
        const failure = await failureOf(Promise.reject(o));
        console.log(`[dr-faults] rbd-mirror killed in the mirror step: the run failed ${failure.type} ${(tookMs / 1000).toFixed(1)} s after the kill (rbd-mirror back in ${(restartMs / 1000).toFixed(1)} s): ${failure.message}`);
        expect(failure.type).toMatch(/^(MirrorNotReplicated|MirrorUnavailable)$/);
        expect(mine).toEqual([]);
        expect(userNames(await drSnaps())).not.toContain(snapOfRun(handle.workflowId));
      } else {
        const d = o.mirror!.disks[0]!;
        console.log(`[dr-faults] rbd-mirror killed in the mirror step: the run finished ${(tookMs / 1000).toFixed(1)} s after the kill (rbd-mirror back in ${(restartMs / 1000).toFixed(1)} s), RPO ${o.mirror!.rpoMs} ms, mirror snapshot ${d.mirrorSnapId} carried by ${d.carriedBy}`);
        expect(d.snapshot).toBe(mine[0]);
        expect(userNames(await drSnaps()), 'the point the run claims is on the DR site').toContain(mine[0]);
        await rbd(env, ['snap', 'rm', '--no-progress', `${env.pools.vm}/${image()}@${mine[0]}`]);
      }
    } finally {
      await restartRbdMirror();
    }
  }, 300_000);

  extendedIt('worker SIGKILLed inside a DR run’s window (after the snapshot, before the thaw): the watchdog thaws by the deadline; the run finishes with its point on the DR site or fails leaving no snapshot; the next DR run counts only its own mirror snapshot', async () => {
    const DEADLINE_MS = 8000;
    const before = await localSnaps();
    await w.stop();
    await w.start({ points: ['snapshot:after', MIRROR_POINT], pauseMs: STALL_MS });
    const handle = await startRun(drRequest(120_000, { freezeDeadlineMs: DEADLINE_MS, agentTimeoutSec: 3, snapshotTimeoutMs: 5000 }));
    let thawedAfter: number;
    try {
      await w.reached('snapshot:after');
      expect(await freezeStatus(vars, guest.name)).toBe('frozen');
      await w.kill();
      const killedAt = Date.now();
      // Nothing of vmsnap's runs now but the watchdog the window armed.
      await until('the watchdog to thaw the guest', async () => ((await freezeStatus(vars, guest.name).catch(() => 'unknown')) === 'thawed' ? true : undefined), DEADLINE_MS + 10_000, 100);
      thawedAfter = Date.now() - killedAt;
      await w.start({ points: [MIRROR_POINT], pauseMs: STALL_MS });
      const { outcome } = passMirrorPoint(handle);
      const o = await outcome;
      const mine = userNames(await localSnaps()).filter((n) => !userNames(before).includes(n));
      if (o instanceof WorkflowFailedError) {
        const failure = await failureOf(Promise.reject(o));
        console.log(`[dr-faults] worker killed in a DR run's window: thawed ${thawedAfter} ms after the kill (deadline ${DEADLINE_MS} ms); the run failed ${failure.type}: ${failure.message}`);
        // The reaper removes what a run that died without compensating left.
        const left = await until('no snapshot of the killed run left', async () => {
          const now = userNames(await localSnaps()).filter((n) => !userNames(before).includes(n));
          return now.length ? undefined : now;
        }, 60_000, 1000).catch(() => mine);
        expect(left, 'the killed run leaves no snapshot a later run could mistake for its own').toEqual([]);
      } else {
        const d = o.mirror!.disks[0]!;
        console.log(`[dr-faults] worker killed in a DR run's window: thawed ${thawedAfter} ms after the kill (deadline ${DEADLINE_MS} ms); the run finished after the restart, quiesced ${o.quiesced}, RPO ${o.mirror!.rpoMs} ms`);
        expect(d.snapshot).toBe(mine[0]);
        expect(userNames(await drSnaps()), 'the point the run claims is on the DR site').toContain(d.snapshot);
        await rbd(env, ['snap', 'rm', '--no-progress', `${env.pools.vm}/${image()}@${d.snapshot}`]);
      }
      expect(thawedAfter).toBeLessThanOrEqual(DEADLINE_MS + 2000);
    } finally {
      await client.workflow.getHandle(handle.workflowId).terminate('dr-faults cleanup').catch(() => undefined);
      if (!w.running) await w.start({ points: [MIRROR_POINT], pauseMs: STALL_MS });
      await ensureThawed(vars, guest.name);
    }
    await drRunSucceeds('after the killed run');
  }, 300_000);
});

// Last in the file: rbd-mirror reports a newly enabled image up+replaying only after 29-59 s on
// this machine, and by now it has replicated this one for the cells' whole length.
describe('vmsnap doctor with a DR site', () => {
  it('every dr line is OK for a mirrored VM: the site, the pool’s peer, rbd-mirror running, the disk’s copy up+replaying', async () => {
    const t0 = performance.now();
    let last: Doctor | undefined;
    const d = await until('doctor to see the DR copy replaying', async () => {
      const r = await vmsnapCli(['doctor', '--domain', guest.name, '--json'], cli);
      const doc = json<Doctor>(r);
      last = doc;
      return drLines(doc).every((c) => c.status === 'ok') && drLines(doc).length === 4 ? doc : undefined;
    }, 90_000, 1000).catch((err: Error) => {
      throw new Error(`${err.message}; doctor's dr lines last:\n${drLines(last!).map((c) => `  ${c.status} ${c.name}: ${c.detail}`).join('\n')}`);
    });
    console.log(`[dr-faults] doctor all OK after ${((performance.now() - t0) / 1000).toFixed(1)} s:\n${drLines(d).map((c) => `  ${c.name}: ${c.detail}`).join('\n')}`);
    expect(drLines(d).map((c) => c.name)).toEqual(['dr site', `dr pool ${env.pools.vm}`, 'dr rbd-mirror', `dr domain ${guest.name} vdb`]);
    expect(drLines(d)[3]!.detail).toMatch(/DR copy up\+replaying, mirror snapshot \d+ copied/);
    expect(drLines(d)[1]!.detail).toContain(`peer ${dr.site} (tx-only)`);
  }, 150_000);
});
