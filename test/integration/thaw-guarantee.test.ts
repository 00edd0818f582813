import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import type { SnapshotRequest } from '../../src/model/input';
import type { SnapshotResult } from '../../src/model/types';
import { LibvirtClient } from '../../src/libvirt';
import { bootId, monoMs } from '../../src/host/clock';
import { FreezeGuard } from '../../src/safety/freeze-guard';
import { ObligationStore } from '../../src/safety/obligation-store';
import { Metrics } from '../../src/host/metrics';
import { jsonLogger } from '../../src/worker/logger';
import { Sweeper } from '../../src/safety/sweeper';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, vmsnapCli } from '../helpers/cli';
import { ensureThawed, freezeStatus, virsh } from '../helpers/guest';
import { uniqueId } from '../helpers/harness';
import { failureOf } from '../helpers/failure-of';
import { labVars, need } from '../../support/lab/env';
import { fsStates, quiescedTruthViolations } from '../helpers/truth';
import { sleep, WorkerProcess } from '../helpers/worker-process';
import { repetitions } from '../helpers/lanes';

/*
 * The thaw guarantee, adversarially, on the real lab: vmsnap never thaws a freeze it did not make,
 * never calls a snapshot quiesced that was not, thaws a freeze that lands late, keeps its journal
 * through a libvirtd outage, runs one worker per state dir, and thaws with Temporal down.
 */

const run = promisify(execFile);
/** The race is the same each run: once in the default lane, three times in the extended one. */
const RACE_RUNS = repetitions(process.env.VMSNAP_RACE_RUNS, 1, 3);
const ROOT = path.resolve(__dirname, '../..');
const vars = labVars();
const ceph = new CephView(vars);
const g1 = need(vars, 'VMSNAP_GUEST_1DISK');
let client: Client;
let worker: WorkerProcess;

beforeAll(async () => {
  client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }) });
  worker = new WorkerProcess(vars, `thaw-${uniqueId('h').slice(2)}`);
  // Every freeze of this worker holds its window 6 s after the freeze returns: time for an
  // operator to act inside it (the CLI's own start is seconds on a loaded host).
  await worker.start({ points: ['freeze:after'], pauseMs: 6000 });
});

afterAll(async () => {
  await ensureThawed(vars, g1);
  await guestCtl('slow-freeze', '0').catch(() => undefined);
  await worker?.stop();
  await client?.connection.close();
});

async function guestCtl(...args: string[]): Promise<void> {
  await run('bash', [path.join(ROOT, 'lab/guest-ctl.sh'), g1, ...args], { timeout: 30_000 });
}

const input = (extra: Partial<SnapshotRequest> = {}): SnapshotRequest => ({
  domain: g1,
  quiesce: 'prefer',
  freezeDeadlineMs: 8000,
  agentTimeoutSec: 3,
  snapshotTimeoutMs: 5000,
  lateSnapshotWatchMs: 6000,
  ...extra,
});

async function start(w: WorkerProcess, request: SnapshotRequest): Promise<WorkflowHandle> {
  return client.workflow.start('consistentSnapshot', { taskQueue: w.taskQueue, workflowId: uniqueId('thaw'), args: [request], workflowExecutionTimeout: '3m' });
}

async function failureType(p: Promise<unknown>): Promise<string | undefined> {
  return (await failureOf(p)).type ?? undefined;
}

/** Everything of a run's names on the guest's source images and in the image pool. */
async function artefacts(workflowId: string): Promise<string[]> {
  const out: string[] = [];
  for (const img of (await ceph.images('vms')).filter((i) => i.startsWith(`${g1}-`))) {
    for (const s of await ceph.snaps('vms', img)) if (s.includes(workflowId)) out.push(`vms/${img}@${s}`);
  }
  for (const img of await ceph.images('images')) if (img.includes(workflowId)) out.push(`images/${img}`);
  return out;
}

async function untilThawed(timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if ((await freezeStatus(vars, g1).catch(() => 'unknown')) === 'thawed') return Date.now() - t0;
    await sleep(200);
  }
  throw new Error(`${g1} still frozen after ${timeoutMs} ms`);
}

describe('ownership: a freeze vmsnap did not make is never thawed by it', () => {
  for (const quiesce of ['require', 'prefer'] as const) {
    it(`operator froze the guest first, quiesce=${quiesce}: typed failure, nothing created, still frozen`, async () => {
      await virsh(vars, 'domfsfreeze', g1);
      try {
        const handle = await start(worker, input({ quiesce }));
        expect(await failureType(handle.result())).toBe('GuestFrozenByOther');
        // Give every thaw layer its chance: past the deadline, two sweeps of the worker.
        await sleep(3000);
        expect(await freezeStatus(vars, g1)).toBe('frozen');
        expect(await artefacts(handle.workflowId)).toEqual([]);
        expect(await new FreezeGuard({ libvirtUri: '', stateDir: worker.stateDir }).entries()).toEqual([]);
      } finally {
        await ensureThawed(vars, g1);
      }
    });
  }
});

describe('truth: quiesced only when the freeze provably held', () => {
  it('an operator `vmsnap thaw` inside the window makes the run say quiesced: false', async () => {
    const handle = await start(worker, input({ freezeDeadlineMs: 20_000 }));
    const done = handle.result().then(
      (r) => r as SnapshotResult,
      () => undefined,
    );
    try {
      await worker.reached('freeze:after');
      const thaw = await vmsnapCli(['thaw', g1, '--json'], cliEnv(vars, { VMSNAP_STATE_DIR: worker.stateDir }));
      expect(thaw.code, thaw.stderr).toBe(0);
      expect(JSON.parse(thaw.stdout)).toMatchObject({ before: 'frozen', frozenBy: expect.stringContaining(handle.workflowId) });
      const result = (await handle.result()) as SnapshotResult;
      try {
        expect(result.quiesced).toBe(false);
        expect(result.quiesceReason).toMatch(/thawed 0 of the 1 filesystem/);
        expect(await quiescedTruthViolations(vars, result)).toEqual([]);
        // The oracle agrees: the snapshot was taken after the operator's thaw.
        expect(Object.values(await fsStates(vars, result))).toEqual(['needs_recovery']);
        const desc = await handle.describe();
        expect(desc.searchAttributes?.VmsnapQuiesced).toEqual([false]);
      } finally {
        await ceph.removeResultImages(result);
      }
    } finally {
      // Never leave the run holding the domain lock for the next test.
      await ceph.removeResultImages(await done).catch(() => undefined);
    }
  });

  it('a window past its deadline is never quiesced; under require it fails FreezeDeadlineExceeded', async () => {
    // The worker pauses 6 s after the freeze returns: past a 2.5 s deadline, the guard fires.
    const tight = { freezeDeadlineMs: 2500, agentTimeoutSec: 2, snapshotTimeoutMs: 2000 };
    const handle = await start(worker, input(tight));
    const result = (await handle.result()) as SnapshotResult;
    try {
      expect(result.quiesced).toBe(false);
      expect(result.quiesceReason).toMatch(/deadline/);
      expect(await quiescedTruthViolations(vars, result)).toEqual([]);
    } finally {
      await ceph.removeResultImages(result);
    }
    const strict = await start(worker, input({ ...tight, quiesce: 'require' }));
    expect(await failureType(strict.result())).toBe('FreezeDeadlineExceeded');
    expect(await artefacts(strict.workflowId)).toEqual([]);
    expect(await freezeStatus(vars, g1)).toBe('thawed');
  });
});

describe('the race the seed bug came back through', () => {
  it(`slow fsfreeze hook + a second actor thawing the moment the agent says frozen: the truth table holds, ${RACE_RUNS} run(s)`, async () => {
    const w = new WorkerProcess(vars, `race-${uniqueId('h').slice(2)}`);
    await w.start();
    await guestCtl('slow-freeze', '2');
    const seen: boolean[] = [];
    try {
      for (let i = 0; i < RACE_RUNS; i++) {
        const handle = await start(w, input());
        let done = false;
        const thawer = (async () => {
          while (!done) {
            if ((await freezeStatus(vars, g1).catch(() => 'unknown')) === 'frozen') {
              await virsh(vars, 'domfsthaw', g1).catch(() => undefined);
              return;
            }
          }
        })();
        const result = (await handle.result()) as SnapshotResult;
        done = true;
        await thawer;
        try {
          seen.push(result.quiesced);
          expect(await quiescedTruthViolations(vars, result)).toEqual([]);
        } finally {
          await ceph.removeResultImages(result);
        }
      }
    } finally {
      await guestCtl('slow-freeze', '0');
      await w.stop();
    }
    expect(seen).toHaveLength(RACE_RUNS);
  });
});

describe('late freezes', () => {
  it('a cancel while a slow hook holds the freeze call: the freeze that lands late is thawed within the watch', async () => {
    const w = new WorkerProcess(vars, `late-${uniqueId('h').slice(2)}`);
    await w.start();
    await guestCtl('slow-freeze', '4');
    try {
      const watchMs = 10_000;
      const handle = await start(w, input({ lateSnapshotWatchMs: watchMs, freezeDeadlineMs: 12_000, agentTimeoutSec: 8 }));
      // Cancel while the agent is inside the hook (the freeze call has not answered).
      await sleep(1500);
      await handle.cancel();
      await handle.result().catch(() => undefined);
      const thawedAfter = await untilThawed(watchMs + 4000);
      expect(thawedAfter).toBeLessThanOrEqual(watchMs + 4000);
      // Stays thawed: nothing lands after the watch.
      await sleep(5000);
      expect(await freezeStatus(vars, g1)).toBe('thawed');
      expect(await artefacts(handle.workflowId)).toEqual([]);
    } finally {
      await guestCtl('slow-freeze', '0');
      await w.stop();
      await ensureThawed(vars, g1);
    }
  });
});

describe("a late-freeze watch and another run's window", () => {
  // Seen in CI: a run's watch, left by a worker that had stopped, thawed the next test's freeze of
  // the same guest inside its window (that run failed FreezeInterrupted). Another worker's watch is
  // this host through a second state dir, or a guest that migrated back within the watch.
  it("leaves another run's recorded window alone, and still thaws a freeze nobody recorded", async () => {
    const stateDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-watch-'));
    const cli = { conf: need(vars, 'CEPH_CONF'), id: vars.CEPH_VMSNAP_ID ?? 'admin', keyring: vars.CEPH_VMSNAP_KEYRING ?? vars.CEPH_KEYRING, timeoutMs: 10_000 };
    const pool = vars.VMSNAP_IMAGE_POOL ?? 'images';
    const guard = new FreezeGuard({ libvirtUri: need(vars, 'LIBVIRT_DEFAULT_URI'), stateDir, obligations: new ObligationStore(cli, pool), obligationSource: { cli, pool }, clockSkewMs: 1000 });
    const uuid = await virsh(vars, 'domuuid', g1);
    await guard.watch({ domainUuid: uuid, domainName: g1, owner: 'another-worker/run', agentTimeoutSec: 3 }, 60_000);
    try {
      // `worker` holds every window 6 s: 24 polls of the watch.
      const result = (await client.workflow.execute('consistentSnapshot', { taskQueue: worker.taskQueue, workflowId: uniqueId('watch'), args: [input({ quiesce: 'require' })] })) as SnapshotResult;
      try {
        expect(result.quiesced).toBe(true);
        expect(await quiescedTruthViolations(vars, result)).toEqual([]);
      } finally {
        await ceph.removeResultImages(result);
      }
      expect(readFileSync(path.join(stateDir, 'guard.log'), 'utf8')).toContain("another run's freeze window; left to its guard");
      // A freeze with no record (an operator's) cannot be told from the watched call landing late.
      await virsh(vars, 'domfsfreeze', g1);
      const t0 = Date.now();
      while ((await freezeStatus(vars, g1)) === 'frozen' && Date.now() - t0 < 10_000) await sleep(100);
      expect(await freezeStatus(vars, g1)).toBe('thawed');
      console.log(`late-freeze watch: left the run's ${result.freezeWindowMs} ms window; thawed an unrecorded freeze ${Date.now() - t0} ms after it`);
    } finally {
      await guard.release(uuid);
      await guard.clear(uuid);
      await ensureThawed(vars, g1);
    }
  });
});

describe('the journal outlives a libvirtd outage', () => {
  it('libvirtd stopped across a sweep of an overdue entry: the entry is kept, the guest thawed once libvirtd is back', async () => {
    const stateDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-sweep-'));
    const uri = need(vars, 'LIBVIRT_DEFAULT_URI');
    const guard = new FreezeGuard({ libvirtUri: uri, stateDir });
    const uuid = (await virsh(vars, 'domuuid', g1)).trim();
    await virsh(vars, 'domfsfreeze', g1);
    // A freeze vmsnap journaled whose deadline has passed, and whose watchdog is gone.
    await guard.journal.write({
      domainUuid: uuid,
      domainName: g1,
      owner: 'test/overdue',
      mode: 'window',
      frozenAt: Date.now() - 20_000,
      deadlineAt: Date.now() - 10_000,
      deadlineMono: monoMs() - 10_000,
      bootId: bootId(),
      agentTimeoutSec: 3,
      guardId: 'none',
    });
    const logs: string[] = [];
    const log = jsonLogger({ host: 'sweep-test' }, { write: (s: string) => (logs.push(s), true) } as unknown as NodeJS.WritableStream);
    let lv: LibvirtClient | undefined;
    const libvirt = async () => (lv ??= await LibvirtClient.connect({ uri, callTimeoutMs: 5000 }));
    const sweeper = new Sweeper(libvirt, guard, new Metrics(), log, 60_000, 0);
    try {
      await run('bash', [path.join(ROOT, 'lab/libvirt.sh'), 'kill'], { timeout: 60_000 });
      expect(await sweeper.sweep()).toBe(0);
      expect((await guard.entries()).map((e) => e.domainUuid)).toEqual([uuid]);
      await run('bash', [path.join(ROOT, 'lab/libvirt.sh'), 'start'], { timeout: 120_000 });
      let thawed = 0;
      for (let i = 0; i < 30 && !thawed; i++) {
        thawed = await sweeper.sweep();
        if (!thawed) await sleep(1000);
      }
      expect(thawed).toBe(1);
      expect(await freezeStatus(vars, g1)).toBe('thawed');
      expect(await guard.entries()).toEqual([]);
    } finally {
      await lv?.close();
      await ensureThawed(vars, g1);
    }
  });
});

describe('one worker per state dir, and thawing with Temporal down', () => {
  it('a second worker on the same state dir is refused and the first is never fenced', async () => {
    const second = new WorkerProcess(vars, `second-${uniqueId('h').slice(2)}`, { VMSNAP_STATE_DIR: worker.stateDir });
    await expect(second.start()).rejects.toThrow(/another vmsnap worker is running on state dir/);
    expect(await second.exitCode()).toBe(1);
    const blocklist = await run('ceph', ['-c', need(vars, 'CEPH_CONF'), '--id', 'admin', '--keyring', need(vars, 'CEPH_KEYRING'), 'osd', 'blocklist', 'ls'], { timeout: 30_000 });
    const sessions = path.join(worker.stateDir, 'sessions');
    for (const f of readdirSync(sessions)) {
      for (const addr of readFileSync(path.join(sessions, f), 'utf8').trim().split(/[,\s]+/).filter(Boolean)) {
        expect(blocklist.stdout + blocklist.stderr).not.toContain(addr.replace(/^v2:/, ''));
      }
    }
    // And the first still works.
    const handle = await start(worker, input({ target: { clone: false }, freezeDeadlineMs: 20_000 }));
    const result = (await handle.result()) as SnapshotResult;
    expect(result.quiesced).toBe(true);
    expect(await quiescedTruthViolations(vars, result)).toEqual([]);
    for (const d of result.disks) {
      const [spec, snap] = d.snapshot.split('@');
      await ceph.rbd('snap', 'rm', `${spec}@${snap}`).catch(() => undefined);
    }
  });

  it('a worker started with Temporal unreachable still thaws a journaled freeze (reconcile, then the sweeper)', async () => {
    const w = new WorkerProcess(vars, `notemporal-${uniqueId('h').slice(2)}`, { VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:9' });
    const uuid = (await virsh(vars, 'domuuid', g1)).trim();
    await virsh(vars, 'domfsfreeze', g1);
    await new FreezeGuard({ libvirtUri: '', stateDir: w.stateDir }).journal.write({
      domainUuid: uuid,
      domainName: g1,
      owner: 'test/dead-worker',
      mode: 'window',
      frozenAt: Date.now(),
      deadlineAt: Date.now() + 60_000,
      deadlineMono: monoMs() + 60_000,
      bootId: bootId(),
      agentTimeoutSec: 3,
      guardId: 'dead',
    });
    try {
      await w.start({}, 'temporal unreachable at start');
      expect(await freezeStatus(vars, g1)).toBe('thawed');
      expect(w.logs.join('')).toMatch(/"layer":"reconcile"/);
    } finally {
      await w.kill();
      await ensureThawed(vars, g1);
    }
  });
});
