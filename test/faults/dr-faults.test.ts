import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIRROR_LOOK_TIMEOUT_MS } from '../../activities/mirror';
import type { SnapshotRequest } from '../../src/model/input';
import type { SnapshotResult } from '../../src/model/types';
import { rbd } from '../../support/lab/cli-tools';
import { drRbd, drSiteUp } from '../../support/lab/dr';
import { labVars, loadLabEnv, type LabDrEnv } from '../../support/lab/env';
import { startScratchGuest, type ScratchGuest } from '../../support/lab/scratch-guest';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { freezeStatus } from '../helpers/guest';
import { startHarness, uniqueId, type Harness } from '../helpers/harness';
import { extendedIt } from '../helpers/lanes';
import { until } from '../helpers/until';

/*
 * DR mode (docs/dr.md) when the DR side fails, and `vmsnap doctor`'s DR checks, on the real lab: a
 * 1-disk guest of the test's own whose disk `vmsnap mirror enable` made mirror to the DR site
 * (lab/dr.sh). The DR site's daemons are stopped and started by their pid files, as lab/dr.sh
 * starts them; every cell leaves the DR site up.
 */
const env = loadLabEnv();
if (!env.guests) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);

let dr: LabDrEnv;
let guest: ScratchGuest;
let cli: NodeJS.ProcessEnv;
let h: Harness;
/** The guest's disk's user snapshots before a cell's run: the run's own are the new ones. */
let before: string[] = [];
const image = () => `${guest.name}-vdb`;

type Doctor = { ok: boolean; checks: { name: string; status: string; detail: string; fix?: string }[] };
const drLines = (d: Doctor) => d.checks.filter((c) => c.name.startsWith('dr '));

beforeAll(async () => {
  const t0 = performance.now();
  dr = await drSiteUp();
  cli = cliEnv(labVars(), { VMSNAP_DR_CEPH_CONF: dr.conf, VMSNAP_DR_CEPH_ID: dr.vmsnapId, VMSNAP_DR_CEPH_KEYRING: dr.vmsnapKeyring });
  guest = await startScratchGuest(env, env.guests!.oneDisk, { disks: 1 });
  const on = await vmsnapCli(['mirror', 'enable', guest.name, '--json'], cli);
  if (on.code !== 0) throw new Error(`mirror enable: ${on.stderr}`);
  h = await startHarness({ config: { drCeph: { conf: dr.conf, id: dr.vmsnapId, keyring: dr.vmsnapKeyring } } });
  console.log(`[dr-faults] DR site up, scratch guest ${guest.name} mirrored, worker up: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
});

afterAll(async () => {
  await h?.stop();
  if (guest) await rbd(env, ['mirror', 'image', 'disable', `${env.pools.vm}/${guest.name}-vdb`]).catch(() => undefined);
  await guest?.remove();
});

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

// ---- the DR site's daemons, by the pid files lab/dr.sh and lab/ceph.sh write ----

const drRun = (file: string) => path.join(env.dir, 'ceph-dr', 'run', file);
const MIRROR_PID = 'client.rbd-mirror.a.pid';
const pidOf = (file: string) => Number(readFileSync(drRun(file), 'utf8').trim());
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function killRbdMirror(): Promise<void> {
  const pid = pidOf(MIRROR_PID);
  process.kill(pid, 'SIGKILL');
  await until('rbd-mirror to die', async () => !alive(pid), 10_000, 100);
}

/** `lab/dr.sh up`: starts rbd-mirror again when it is not running and waits until it registered. */
async function restartRbdMirror(): Promise<number> {
  const t0 = performance.now();
  await drSiteUp();
  return performance.now() - t0;
}

/** The DR cluster stops answering (a partition): its mon and OSD SIGSTOPped, SIGCONT undoes it. */
function pauseDrCluster(signal: 'SIGSTOP' | 'SIGCONT'): void {
  for (const f of ['mon.a.pid', 'osd.0.pid']) process.kill(pidOf(f), signal);
}

/** The DR site's copy of the guest's disk: the names of its snapshots (the DR cluster's own CLI). */
async function drSnapNames(): Promise<string[]> {
  const out = JSON.parse((await drRbd(dr, ['snap', 'ls', '--all', `${dr.pool}/${image()}`, '--format', 'json'])).stdout) as { name: string }[];
  return out.map((x) => x.name);
}

async function localUserSnaps(): Promise<string[]> {
  const out = JSON.parse((await rbd(env, ['snap', 'ls', `${env.pools.vm}/${image()}`, '--format', 'json'])).stdout) as { name: string }[];
  return out.map((x) => x.name);
}

function start(request: SnapshotRequest) {
  return h.client.workflow.start('consistentSnapshot', { taskQueue: h.hw.taskQueue, workflowId: uniqueId('drf'), args: [request] });
}

const drRequest = (waitMs: number): SnapshotRequest => ({ domain: guest.name, quiesce: 'require', target: { clone: false, mirror: { waitMs } } });

async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err, 'the run must fail').toBeInstanceOf(WorkflowFailedError);
  let cause = (err as WorkflowFailedError).cause;
  while (cause && !(cause instanceof ApplicationFailure)) cause = (cause as { cause?: Error }).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

describe('DR mode when the DR side fails: never a replicated point that is not there', () => {
  extendedIt('rbd-mirror SIGKILLed as a DR run starts, restarted 10 s later: the run finishes with its snapshot on the DR site, or fails typed leaving nothing behind; never a point the DR site lacks; the guest thawed', async () => {
    before = await localUserSnaps();
    await killRbdMirror();
    let restartMs = 0;
    try {
      const t0 = Date.now();
      const handle = await start(drRequest(120_000));
      const restarted = new Promise((r) => setTimeout(r, 10_000)).then(async () => {
        restartMs = await restartRbdMirror();
      });
      const outcome = await handle.result().then((r) => r as SnapshotResult, (e: unknown) => e);
      await restarted;
      expect(await freezeStatus(h.vars, guest.name)).toBe('thawed');
      const mine = (await localUserSnaps()).filter((n) => !before.includes(n));
      if (outcome instanceof WorkflowFailedError) {
        const failure = await failureOf(Promise.reject(outcome));
        console.log(`[dr-faults] rbd-mirror killed: the run failed ${failure.type} after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${failure.message}`);
        expect(failure.type).toMatch(/^(SnapshotTimeout|MirrorNotReplicated|MirrorUnavailable)$/);
        expect(mine, 'a failed run leaves no snapshot a later run could mistake for its own').toEqual([]);
      } else {
        const r = outcome as SnapshotResult;
        console.log(`[dr-faults] rbd-mirror killed: the run finished ${((Date.now() - t0) / 1000).toFixed(1)} s after its start (rbd-mirror back in ${(restartMs / 1000).toFixed(1)} s), RPO ${r.mirror!.rpoMs} ms`);
        expect(r.mirror!.disks[0]!.snapshot).toBe(mine[0]);
        expect(await drSnapNames(), 'the point the run claims is on the DR site').toContain(mine[0]);
        await rbd(env, ['snap', 'rm', '--no-progress', `${env.pools.vm}/${image()}@${mine[0]}`]);
      }
    } finally {
      await restartRbdMirror();
    }
  }, 240_000);

  it('the DR site unreachable (its mon and OSD stopped): the run fails MirrorUnavailable within waitMs plus one look\'s bound; the guest thawed, the run\'s snapshot removed by its compensation', async () => {
    const waitMs = 6000;
    before = await localUserSnaps();
    pauseDrCluster('SIGSTOP');
    let elapsed: number;
    let failure: ApplicationFailure;
    try {
      const t0 = Date.now();
      const handle = await start(drRequest(waitMs));
      failure = await failureOf(handle.result());
      elapsed = Date.now() - t0;
    } finally {
      pauseDrCluster('SIGCONT');
    }
    console.log(`[dr-faults] DR site unreachable: the run failed ${failure.type} after ${elapsed} ms: ${failure.message}`);
    expect(failure).toMatchObject({ type: 'MirrorUnavailable', nonRetryable: true });
    expect(failure.message).toContain('did not answer');
    // Bounded: the window and the mirror snapshot (a few s on this lab), waitMs, one look's bound.
    expect(elapsed).toBeLessThan(waitMs + MIRROR_LOOK_TIMEOUT_MS + 15_000);
    expect(await freezeStatus(h.vars, guest.name)).toBe('thawed');
    const mine = (await localUserSnaps()).filter((n) => !before.includes(n));
    expect(mine, 'the failed run leaves no snapshot a later run could mistake for its own').toEqual([]);
    await until('the DR cluster to answer again', async () => (await drSnapNames().then(() => true, () => undefined)), 180_000, 1000);
    for (const n of mine) await rbd(env, ['snap', 'rm', '--no-progress', `${env.pools.vm}/${image()}@${n}`]).catch(() => undefined);
  }, 300_000);
});

