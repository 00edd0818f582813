import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LibvirtConnectionError, LibvirtError } from '../../src/libvirt';
import type { LibvirtClient } from '../../src/libvirt';
import { bootId, monoMs } from '../../src/host/clock';
import { FreezeGuard } from '../../src/safety/freeze-guard';
import { spawnWatchdog } from '../../src/safety/watchdog-standby';
import { FreezeJournal, firedMarkerPath, isOverdue, parseEntry } from '../../src/safety/freeze-journal';
import type { JournalEntry } from '../../src/safety/freeze-journal';
import { lockStateDir, StateDirLockedError } from '../../src/host/state-dir-lock';
import { thawAndConfirm, ThawNotConfirmedError } from '../../src/safety/thaw-confirm';
import { Metrics } from '../../src/host/metrics';
import { judgeFreeze } from '../../src/model/quiesce-truth';
import { reconcile } from '../../src/safety/reconcile';
import { Sweeper } from '../../src/safety/sweeper';
import { jsonLogger } from '../../src/worker/logger';

/*
 * The fast lane for the thaw layers' logic: journal, guard, thaw-and-confirm, sweeper, reconcile,
 * the state-dir lock and the quiesce verdict. The libvirt side here is a scripted stand-in; the
 * same layers run against the real lab in test/integration/thaw-guarantee.test.ts and the faults.
 */

const UUID = '6f1b1c2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f';
const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'vmsnap-unit-'));
const quiet = jsonLogger({ host: 'unit' }, { write: () => true } as unknown as NodeJS.WritableStream);

/** A live process (a zombie awaiting its reaper counts as gone). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

function readFileSafe(f: string): string {
  try {
    return readFileSync(f, 'utf8');
  } catch {
    return '';
  }
}

function libvirtError(code: number, message = `libvirt error ${code}`): LibvirtError {
  return new LibvirtError({ code, domain: 10, level: 2, message, procedure: 'TEST' });
}

/** A guest agent stand-in: frozen or not, with failures scripted per call. */
function fakeLibvirt(state: { frozen: number; gone?: boolean; down?: boolean; statusFails?: number; thawFails?: number; setTimeouts?: number[] }) {
  const calls: string[] = [];
  const lv = {
    async lookupDomainByUuid(uuid: string) {
      calls.push('lookup');
      if (state.down) throw new LibvirtConnectionError('connection refused');
      if (state.gone) throw libvirtError(42, 'Domain not found');
      return { uuid, name: 'g', id: 1 };
    },
    async fsThaw() {
      calls.push('thaw');
      if (state.thawFails && state.thawFails-- > 0) throw libvirtError(86, 'agent unresponsive');
      const n = state.frozen;
      state.frozen = 0;
      return n;
    },
    async fsFreezeStatus() {
      calls.push('status');
      if (state.statusFails && state.statusFails-- > 0) throw libvirtError(86, 'agent unresponsive');
      return state.frozen ? 'frozen' : 'thawed';
    },
    async getDomainState() {
      return { state: 'running', reason: 0 };
    },
    async setAgentResponseTimeout(_d: unknown, s: number) {
      (state.setTimeouts ??= []).push(s);
    },
  };
  return { lv: lv as unknown as LibvirtClient, calls };
}

function entry(over: Partial<JournalEntry> = {}): JournalEntry {
  return {
    domainUuid: UUID,
    domainName: 'g',
    owner: 'wf/run',
    mode: 'window',
    frozenAt: Date.now(),
    deadlineAt: Date.now() - 1,
    deadlineMono: monoMs() - 1,
    bootId: bootId(),
    agentTimeoutSec: 1,
    guardId: 'g-1',
    ...over,
  };
}

describe('thawAndConfirm', () => {
  it('thaws, then proves by status; returns the count', async () => {
    const { lv, calls } = fakeLibvirt({ frozen: 2 });
    expect(await thawAndConfirm(lv, UUID, 1)).toEqual({ outcome: 'thawed', thawedFilesystems: 2, wasFrozen: true, thawedAt: expect.any(Number) });
    expect(calls).toEqual(['lookup', 'thaw', 'status']);
  });
  it('a failed first thaw is retried when the status still says frozen', async () => {
    const { lv } = fakeLibvirt({ frozen: 1, thawFails: 1 });
    expect(await thawAndConfirm(lv, UUID, 1)).toMatchObject({ outcome: 'thawed', thawedFilesystems: 1 });
  });
  it('no such domain (42) is "gone"; a connection error is not', async () => {
    expect(await thawAndConfirm(fakeLibvirt({ frozen: 0, gone: true }).lv, UUID, 1)).toMatchObject({ outcome: 'gone' });
    await expect(thawAndConfirm(fakeLibvirt({ frozen: 1, down: true }).lv, UUID, 1)).rejects.toBeInstanceOf(LibvirtConnectionError);
  });
  it('an unprovable thaw throws', async () => {
    await expect(thawAndConfirm(fakeLibvirt({ frozen: 1, statusFails: 5, thawFails: 5 }).lv, UUID, 1)).rejects.toBeInstanceOf(ThawNotConfirmedError);
  });
});

describe('freeze journal', () => {
  it('round-trips an entry and quarantines a malformed file instead of throwing', async () => {
    const dir = tmp();
    const j = new FreezeJournal(dir);
    await j.write(entry());
    expect((await j.entries()).map((e) => e.domainUuid)).toEqual([UUID]);
    writeFileSync(path.join(dir, 'frozen', '11111111-2222-4333-8444-555555555555.json'), '{"torn":');
    const logged: string[] = [];
    const j2 = new FreezeJournal(dir, (m) => logged.push(m));
    expect((await j2.entries()).map((e) => e.domainUuid)).toEqual([UUID]);
    expect(logged).toEqual(['malformed freeze journal entry moved aside']);
    expect(readdirSync(path.join(dir, 'frozen')).some((n) => n.includes('.json.bad-'))).toBe(true);
  });
  it('deadlines are monotonic; an entry from another boot is overdue', () => {
    expect(isOverdue(entry({ deadlineMono: monoMs() + 60_000 }))).toBe(false);
    expect(isOverdue(entry({ deadlineMono: monoMs() + 60_000, bootId: 'another-boot' }))).toBe(true);
    // Wall time says long overdue, the monotonic clock says not: the monotonic clock wins.
    expect(isOverdue(entry({ deadlineAt: 0, deadlineMono: monoMs() + 60_000 }))).toBe(false);
  });
  it('rejects entries with a bad uuid or missing fields', () => {
    expect(parseEntry(JSON.stringify({ ...entry(), domainUuid: '../etc' }))).toBeUndefined();
    expect(parseEntry('[]')).toBeUndefined();
  });
});

describe('freeze guard', () => {
  it('release before the deadline stops the watchdog: it never fires', async () => {
    const dir = tmp();
    const guard = new FreezeGuard({ libvirtUri: 'qemu:///system?socket=/nonexistent', stateDir: dir });
    const armed = await guard.arm({ domainUuid: UUID, domainName: 'g', owner: 'wf/run', deadlineMs: 1500, agentTimeoutSec: 1 });
    expect(armed.guardPid).toBeGreaterThan(0);
    expect(await guard.release(UUID)).toEqual({});
    await new Promise((r) => setTimeout(r, 2500));
    expect(await guard.release(UUID)).toEqual({});
    expect(alive(armed.guardPid!)).toBe(false);
  });
  it('at the deadline the watchdog records that it fired and keeps retrying an unreachable libvirt', async () => {
    const dir = tmp();
    const guard = new FreezeGuard({ libvirtUri: 'qemu:///system?socket=/nonexistent', stateDir: dir });
    const armed = await guard.arm({ domainUuid: UUID, domainName: 'g', owner: 'wf/run', deadlineMs: 300, agentTimeoutSec: 1 });
    const marker = firedMarkerPath(dir, UUID);
    for (let i = 0; i < 100 && !existsSync(marker); i++) await new Promise((r) => setTimeout(r, 200));
    // Let it try (and fail) to reach libvirtd at least once.
    for (let i = 0; i < 100 && !readFileSafe(path.join(dir, 'guard.log')).includes('retrying'); i++) await new Promise((r) => setTimeout(r, 200));
    expect(readFileSafe(path.join(dir, 'guard.log'))).toContain('guard thaw not proven yet; retrying');
    const { guardFiredAt } = await guard.release(UUID);
    expect(guardFiredAt).toBeGreaterThan(0);
    // SIGKILLed: gone once the kernel and our child reaper have caught up.
    for (let i = 0; i < 50 && alive(armed.guardPid!); i++) await new Promise((r) => setTimeout(r, 100));
    expect(alive(armed.guardPid!)).toBe(false);
    // The entry stays: nothing proved the guest thawed.
    expect((await guard.entries()).length).toBe(1);
  }, 60_000); // its own waits (up to 20 s + 20 s + 5 s) fit in this
});

describe('freeze guard of a long-lived process (issue 31: the cost of a run outside its window)', () => {
  // A case that fails between an arm and its release must not leave a watchdog retrying forever.
  const dirs: string[] = [];
  const ownTmp = () => {
    const d = tmp();
    dirs.push(d);
    return d;
  };
  afterAll(() => {
    for (const d of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
      if (dirs.some((dir) => cmdline(Number(d)).includes(dir))) killQuietly(Number(d));
    }
  });
  it('a prewarmed watchdog is the one armed, and it fires at the deadline like a fresh one', async () => {
    const dir = ownTmp();
    const guard = new FreezeGuard({ libvirtUri: 'qemu:///system?socket=/nonexistent', stateDir: dir, longLived: { standbys: 1 } });
    guard.prewarm();
    // Up (it says so on its pipe) before the arm, as at a run's inspect ahead of its freeze.
    await until(() => guard.standbysUp() > 0 || undefined, 30_000);
    const armed = await guard.arm({ domainUuid: UUID, domainName: 'g', owner: 'wf/run', deadlineMs: 300, agentTimeoutSec: 1 });
    const standby = armed.guardPid!;
    expect(cmdline(standby)).toContain('--standby');
    await until(() => existsSync(firedMarkerPath(dir, UUID)) || undefined, 20_000);
    expect((await guard.release(UUID)).guardFiredAt).toBeGreaterThan(0);
    await until(() => !alive(standby) || undefined, 5000);
    // Nothing warm left: the next arm starts its own, as without standbys.
    const next = await guard.arm({ domainUuid: UUID, domainName: 'g', owner: 'wf/run2', deadlineMs: 60_000, agentTimeoutSec: 1 });
    expect(cmdline(next.guardPid!)).not.toContain('--standby');
    await guard.release(UUID);
    guard.close();
  }, 60_000);

  it('an unarmed standby exits when its worker lets it go or dies (an armed one outliving its worker: the SIGKILL cases of thaw-guarantee)', async () => {
    const guard = new FreezeGuard({ libvirtUri: 'qemu:///system?socket=/nonexistent', stateDir: ownTmp(), longLived: { standbys: 2 } });
    guard.prewarm();
    const idle = await until(() => standbyPids().find((p) => !before.has(p)), 20_000);
    guard.close(); // while it may still be starting: it goes once up
    await until(() => !alive(idle) || undefined, 20_000);
    // A worker that dies: its pipe ends, the standby goes.
    const script = `const { FreezeGuard } = require(${JSON.stringify(path.resolve('src/safety/freeze-guard.ts'))});
      const g = new FreezeGuard({ libvirtUri: 'qemu:///system?socket=/nonexistent', stateDir: ${JSON.stringify(tmp())}, longLived: { standbys: 1 } });
      g.prewarm(); setTimeout(() => process.kill(process.pid, 'SIGKILL'), 6000);`;
    const seen = new Set(standbyPids());
    const worker = spawn(process.execPath, ['--require', 'tsx/cjs', '-e', script], { stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((r) => worker.on('exit', (_c, sig) => r(sig)));
    const orphan = await until(() => standbyPids().find((p) => !seen.has(p)), 20_000);
    expect(await exited).toBe('SIGKILL');
    await until(() => !alive(orphan) || undefined, 20_000); // start-up included: it may still be loading when its worker dies
  }, 60_000);

  it('a standby nobody arms exits on its own once its idle time is up, its pipe still open', async () => {
    const child = spawnWatchdog(['--standby', '1500']); // the worker's is STANDBY_IDLE_MS, 120 s
    const pipe = child.stdio[3]!;
    const up = new Promise<string>((r) => pipe.once('data', (d) => r(String(d))));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    expect(await up).toBe('up\n');
    const t0 = Date.now();
    expect(await exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(20_000);
    pipe.destroy();
  }, 60_000);

  it("a cleared freeze's obligation goes after clear returns, queued until then; the next arm of the domain waits for it", async () => {
    const dir = ownTmp();
    const removed: string[] = [];
    let gate: () => void = () => undefined;
    const held = new Promise<void>((r) => (gate = r));
    const records = new Map<string, string>();
    const obligations = {
      write: async (o: { domainUuid: string; freezeId: string }) => void records.set(o.domainUuid, o.freezeId),
      read: async () => undefined,
      all: async () => [],
      resolve: async (_d: string, f?: string) => {
        await held;
        removed.push(f ?? '');
        return true;
      },
    };
    const guard = new FreezeGuard({ libvirtUri: 'qemu:///system?socket=/nonexistent', stateDir: dir, obligations: obligations as never, longLived: { standbys: 0 } });
    const first = await guard.arm({ domainUuid: UUID, domainName: 'g', owner: 'wf/run', deadlineMs: 60_000, agentTimeoutSec: 1 });
    await guard.release(UUID);
    await guard.clear(UUID); // returns with Ceph still holding the record
    expect(removed).toEqual([]);
    expect(readFileSync(path.join(guard.journal.dir, `${UUID}.unrecord`), 'utf8')).toBe(first.freezeId);
    let armedAgain = false;
    const second = guard.arm({ domainUuid: UUID, domainName: 'g', owner: 'wf/run2', deadlineMs: 60_000, agentTimeoutSec: 1 }).then((e) => ((armedAgain = true), e));
    await new Promise((r) => setTimeout(r, 300));
    expect(armedAgain).toBe(false);
    gate();
    const e2 = await second;
    expect(removed).toEqual([first.freezeId]);
    expect(records.get(UUID)).toBe(e2.freezeId);
    expect(existsSync(path.join(guard.journal.dir, `${UUID}.unrecord`))).toBe(false);
    await guard.release(UUID);
  }, 60_000);

  it('a removal Ceph refuses stays queued for the sweeper', async () => {
    const dir = ownTmp();
    let refuse = true;
    const obligations = {
      write: async () => undefined,
      read: async () => undefined,
      all: async () => [],
      resolve: async () => {
        if (refuse) throw new Error('rados: timed out');
        return true;
      },
    };
    const guard = new FreezeGuard({ libvirtUri: 'qemu:///system?socket=/nonexistent', stateDir: dir, obligations, longLived: { standbys: 0 } });
    await guard.arm({ domainUuid: UUID, domainName: 'g', owner: 'wf/run', deadlineMs: 60_000, agentTimeoutSec: 1 });
    await guard.release(UUID);
    await guard.clear(UUID);
    await new Promise((r) => setTimeout(r, 200));
    expect(existsSync(path.join(guard.journal.dir, `${UUID}.unrecord`))).toBe(true);
    refuse = false;
    expect(await guard.retryUnrecords()).toBe(0);
    expect(existsSync(path.join(guard.journal.dir, `${UUID}.unrecord`))).toBe(false);
  });
});

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** Watchdog processes in standby (their argv says so), to tell a test's own from others'. */
function standbyPids(): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d) && / --standby /.test(cmdline(Number(d))) && cmdline(Number(d)).includes('watchdog'))
    .map(Number);
}
const before = new Set(standbyPids());

async function until<T>(f: () => T | undefined | false, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('late-freeze watch', () => {
  it('its watchdog waits for the guard to journal it, and watches until the end (it used to read the entry first and quit)', async () => {
    const guard = new FreezeGuard({ libvirtUri: 'qemu+unix:///system?socket=/nonexistent', stateDir: tmp() });
    const e = await guard.watch({ domainUuid: UUID, domainName: 'g', owner: 'wf/run', agentTimeoutSec: 1 }, 4000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(alive(e.guardPid!)).toBe(true);
    await guard.release(UUID);
  });
});

describe('sweeper and reconcile', () => {
  it('thaws an overdue window, skips one in its window, and keeps an entry it cannot prove thawed', async () => {
    const dir = tmp();
    const guard = new FreezeGuard({ libvirtUri: '', stateDir: dir });
    await guard.journal.write(entry());
    const state = { frozen: 1, down: true };
    const { lv } = fakeLibvirt(state);
    const sweeper = new Sweeper(async () => lv, guard, new Metrics(), quiet, 60_000, 0);
    expect(await sweeper.sweep()).toBe(0);
    expect(await guard.entries()).toHaveLength(1);
    state.down = false;
    expect(await sweeper.sweep()).toBe(1);
    expect(await guard.entries()).toEqual([]);
    await guard.journal.write(entry({ deadlineMono: monoMs() + 60_000 }));
    state.frozen = 1;
    expect(await sweeper.sweep()).toBe(0);
    expect(state.frozen).toBe(1);
  });
  it('a sweep never throws, whatever libvirt does', async () => {
    const guard = new FreezeGuard({ libvirtUri: '', stateDir: tmp() });
    await guard.journal.write(entry());
    const sweeper = new Sweeper(async () => Promise.reject(new Error('no libvirtd')), guard, new Metrics(), quiet, 60_000, 0);
    await expect(sweeper.sweep()).resolves.toBe(0);
  });
  it('a late-freeze watch thaws what lands and stays until its end; the domain gone goes only through the fleet', async () => {
    const guard = new FreezeGuard({ libvirtUri: '', stateDir: tmp() });
    await guard.journal.write(entry({ mode: 'watch', deadlineMono: monoMs() + 60_000 }));
    const state = { frozen: 1, gone: false };
    const sweeper = new Sweeper(async () => fakeLibvirt(state).lv, guard, new Metrics(), quiet, 60_000, 0);
    expect(await sweeper.sweep()).toBe(1);
    expect(await guard.entries()).toHaveLength(1);
    state.gone = true;
    // Gone from this host may be frozen on another: without a way to the fleet, the entry stays.
    await sweeper.sweep();
    expect(await guard.entries()).toHaveLength(1);
    const asked: string[] = [];
    sweeper.handOff = async (e) => (asked.push(e.domainUuid), 'vmsnap-handoff-x');
    await sweeper.sweep();
    expect(asked).toEqual([UUID]);
    expect(await guard.entries()).toEqual([]);
  });
  it("a late-freeze watch leaves another run's recorded window frozen, and thaws once that record is gone or cannot be read", async () => {
    const other = { freezeId: 'f-other', domainUuid: UUID, domainName: 'g', owner: 'other/run', host: 'hv-b', frozenAt: Date.now(), deadlineAt: Date.now() + 60_000, agentTimeoutSec: 1, disks: [] };
    let open: typeof other | undefined = other;
    let unreadable = false;
    const obligations = {
      write: async () => undefined,
      read: async () => {
        if (unreadable) throw new Error('rados: timed out');
        return open;
      },
      all: async () => [],
      resolve: async () => true,
    };
    const guard = new FreezeGuard({ libvirtUri: '', stateDir: tmp(), obligations });
    await guard.journal.write(entry({ mode: 'watch', deadlineMono: monoMs() + 60_000, freezeId: 'f-watched' }));
    const state = { frozen: 1 };
    const sweeper = new Sweeper(async () => fakeLibvirt(state).lv, guard, new Metrics(), quiet, 60_000, 0);
    expect(await sweeper.sweep()).toBe(0);
    expect(state.frozen).toBe(1);
    expect(await guard.entries()).toHaveLength(1);
    unreadable = true;
    expect(await sweeper.sweep()).toBe(1);
    state.frozen = 1;
    unreadable = false;
    open = undefined;
    expect(await sweeper.sweep()).toBe(1);
    expect(await guard.entries()).toHaveLength(1);
  });

  it('a hand-off that fails keeps the entry for the next sweep', async () => {
    const guard = new FreezeGuard({ libvirtUri: '', stateDir: tmp() });
    await guard.journal.write(entry({ deadlineMono: monoMs() - 1 }));
    const sweeper = new Sweeper(async () => fakeLibvirt({ frozen: 0, gone: true }).lv, guard, new Metrics(), quiet, 60_000, 0);
    sweeper.handOff = async () => Promise.reject(new Error('temporal unreachable'));
    await sweeper.sweep();
    expect(await guard.entries()).toHaveLength(1);
  });
  it('reconcile resolves every window entry at start, deadline or not, and restores the agent timeout', async () => {
    const guard = new FreezeGuard({ libvirtUri: '', stateDir: tmp() });
    await guard.journal.write(entry({ deadlineMono: monoMs() + 60_000, previousAgentTimeout: 7 }));
    const state = { frozen: 1, setTimeouts: [] as number[] };
    const reports = await reconcile(async () => fakeLibvirt(state).lv, guard, new Metrics(), quiet);
    expect(reports).toMatchObject([{ wasFrozen: true, thawedBy: 'reconcile', kept: false }]);
    expect(state.setTimeouts).toEqual([7]);
    expect(await guard.entries()).toEqual([]);
  });
});

describe('state-dir lock', () => {
  it('a second holder is refused until the first releases', async () => {
    const dir = tmp();
    const first = await lockStateDir(dir);
    await expect(lockStateDir(dir)).rejects.toBeInstanceOf(StateDirLockedError);
    await first.release();
    const again = await lockStateDir(dir);
    await again.release();
  });
});

describe('judgeFreeze: quiesced only when the freeze provably held', () => {
  const freeze = { frozenFilesystems: 1, startedAt: 0, returnedAt: 100, startedMono: 1000, returnedMono: 1100 };
  const snapshot = { startedAt: 100, returnedAt: 200, startedMono: 1100, returnedMono: 1200, perDiskMs: {} };
  const thaw = { thawedFilesystems: 1, startedAt: 200, returnedAt: 250, startedMono: 1200, returnedMono: 1250 };
  it('all three proofs hold', () => expect(judgeFreeze(freeze, snapshot, thaw, 10_000)).toMatchObject({ quiesced: true }));
  it('the guard fired', () =>
    expect(judgeFreeze(freeze, snapshot, { ...thaw, guardFiredAt: 5 }, 10_000)).toMatchObject({ quiesced: false, failure: 'FreezeDeadlineExceeded' }));
  it('past the deadline on the monotonic clock, whatever the wall clock says', () =>
    expect(judgeFreeze(freeze, snapshot, { ...thaw, startedMono: 12_000 }, 10_000)).toMatchObject({ quiesced: false, failure: 'FreezeDeadlineExceeded' }));
  it('somebody thawed first: our thaw thawed 0', () =>
    expect(judgeFreeze(freeze, snapshot, { ...thaw, thawedFilesystems: 0 }, 10_000)).toMatchObject({ quiesced: false, failure: 'FreezeInterrupted' }));
  it('histories from before the monotonic fields still judge by count and guard', () => {
    const old = { frozenFilesystems: 1, startedAt: 0, returnedAt: 1 };
    expect(judgeFreeze(old, { startedAt: 1, returnedAt: 2, perDiskMs: {} }, { thawedFilesystems: 1, startedAt: 2, returnedAt: 3 }, 10)).toMatchObject({ quiesced: true });
  });
});
