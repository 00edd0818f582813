import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { bootId, monoMs } from '../host/clock';
import { FreezeJournal, firedMarkerPath } from './freeze-journal';
import type { JournalEntry, JournalLogger } from './freeze-journal';
import { nodeEntry } from '../host/node-entry';
import type { WatchdogArgs } from './watchdog-args';
import type { FreezeObligation } from '../model/freeze-obligation';
import type { OmapCliOptions } from '../ceph/omap-cli';
import type { LibvirtClient } from '../libvirt';
import { anotherRunsWindow } from './late-freeze';
import { WatchdogStandbys, killGroup, spawnWatchdog } from './watchdog-standby';

export type { JournalEntry } from './freeze-journal';

/**
 * Host freeze guard: a watchdog process per freeze that thaws the guest at its deadline unless
 * released first. It is spawned detached (own session) before the freeze call, so it fires even
 * when the worker is SIGKILLed, Temporal is unreachable or the workflow was terminated — the
 * cases where Temporal runs no compensation (temporalio/temporal#1412). The watchdog ends the
 * freeze through the same thaw-and-confirm as every other layer and retries until the guest
 * says `thawed` or the domain is gone.
 *
 * After a freeze whose outcome is unknown (a timed-out or cancelled freeze call), the entry is
 * turned into a `watch`: a watchdog polls guest-fsfreeze-status until the watch ends and thaws a
 * freeze that lands late.
 */
export interface FreezeGuardOptions {
  /** libvirt URI the watchdog connects to (read-write: thaw and the agent need it). */
  libvirtUri: string;
  /** Host-local state directory (journal, markers and the guard's log). */
  stateDir: string;
  log?: JournalLogger;
  /**
   * The cluster-wide record of the freeze (src/safety/obligation-store.ts): written with the journal
   * entry before the freeze call, so the host the guest migrates to can end it without this one.
   * Every worker and CLI passes it; unit tests of the host-local layers may leave it out.
   */
  obligations?: Obligations;
  /** This host's name, recorded as the freezing host. */
  host?: string;
  /**
   * Where a late-freeze watch's watchdog reads the obligations from (its own bounded `rados`
   * calls: it holds none of the worker's), to leave another run's window alone
   * (src/safety/late-freeze.ts). Without it a watch thaws whatever it finds frozen.
   */
  obligationSource?: { cli: OmapCliOptions; pool: string };
  /** How far two hosts' wall clocks may disagree (config clockSkewMs; default 1000). */
  clockSkewMs?: number;
  /**
   * This process outlives its freezes (the worker): it keeps `standbys` watchdogs up ahead of
   * freezes ({@link FreezeGuard.prewarm}; one per freeze window the host allows) and resolves a
   * cleared freeze's obligation after the call returns (queued first, so a worker that dies
   * before leaves it to the sweeper). Without it, as a one-shot CLI process must: every arm starts
   * its own watchdog and every clear waits for Ceph.
   */
  longLived?: { standbys: number };
}

/** What the guard needs of the obligation store (ObligationStore; tests pass an in-memory one). */
export interface Obligations {
  write(o: FreezeObligation): Promise<void>;
  read(domainUuid: string): Promise<FreezeObligation | undefined>;
  all(): Promise<FreezeObligation[]>;
  resolve(domainUuid: string, freezeId?: string): Promise<boolean>;
}

/** The freeze was never asked for: its obligation could not be recorded. Nothing is armed. */
export class ArmError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'ArmError';
  }
}

export interface ArmRequest {
  domainUuid: string;
  domainName: string;
  owner: string;
  deadlineMs: number;
  agentTimeoutSec: number;
  previousAgentTimeout?: number;
  /** The guest's RBD disks, recorded so "running nowhere" can be proven (no watchers). */
  disks?: FreezeObligation['disks'];
}

/**
 * One mechanism, one owner: a freeze's life is arm → (hand over) → resolve → forget, and every
 * layer (the run's thaw, the watchdog's marker, reconcile, the sweeper, arrivals, `vmsnap thaw`)
 * goes through these methods. Nothing else writes or removes a journal entry or an obligation.
 */
export class FreezeGuard {
  readonly journal: FreezeJournal;
  private readonly standbys: WatchdogStandbys | undefined;
  /** Obligations being resolved after their clear returned, by domain; a new arm of it waits. */
  private readonly settling = new Map<string, Promise<void>>();
  constructor(private readonly opts: FreezeGuardOptions) {
    this.journal = new FreezeJournal(opts.stateDir, opts.log);
    this.standbys = opts.longLived?.standbys ? new WatchdogStandbys(opts.longLived.standbys) : undefined;
  }

  /**
   * A run that will freeze has begun: start a watchdog now, so its start-up is done by the time
   * the freeze is armed rather than between the run's turn and its freeze call. Never waits.
   */
  prewarm(): void {
    this.standbys?.prewarm();
  }

  /** Standby watchdogs up and unused. */
  standbysUp(): number {
    return this.standbys?.up ?? 0;
  }

  /** Lets idle standby watchdogs go (the worker's shutdown); armed ones are not touched. */
  close(): void {
    this.standbys?.close();
  }

  /**
   * Journals the freeze, records its obligation in Ceph and starts its watchdog, the three at once.
   * Call before virDomainFSFreeze. When the obligation cannot be recorded nothing stays armed and
   * ArmError says the freeze must not be asked for: a freeze only this host knows of is exactly the
   * one that stays frozen when the guest migrates.
   */
  async arm(req: ArmRequest): Promise<JournalEntry> {
    // The previous freeze's record is removed by freeze id after a read: let it finish before this
    // freeze's record replaces it, or its removal could take this one's.
    await this.settling.get(req.domainUuid);
    // A watchdog left by an earlier attempt (dead worker, replayed task) must not fire into this freeze.
    await this.stopWatchdog(req.domainUuid);
    await fs.rm(this.firedPath(req.domainUuid), { force: true });
    const wall = Date.now();
    const freezeId = randomUUID();
    const entry: JournalEntry = {
      domainUuid: req.domainUuid,
      domainName: req.domainName,
      owner: req.owner,
      mode: 'window',
      frozenAt: wall,
      deadlineAt: wall + req.deadlineMs,
      deadlineMono: monoMs() + req.deadlineMs,
      bootId: bootId(),
      agentTimeoutSec: req.agentTimeoutSec,
      guardId: randomUUID(),
      freezeId,
      ...(req.previousAgentTimeout !== undefined ? { previousAgentTimeout: req.previousAgentTimeout } : {}),
    };
    const record = this.opts.obligations?.write({
      freezeId,
      domainUuid: req.domainUuid.toLowerCase(),
      domainName: req.domainName,
      owner: req.owner,
      host: this.opts.host ?? os.hostname(),
      frozenAt: wall,
      deadlineAt: entry.deadlineAt,
      agentTimeoutSec: req.agentTimeoutSec,
      disks: req.disks ?? [],
    });
    const [armed, recorded] = await Promise.allSettled([this.start(entry), record ?? Promise.resolve()]);
    if (armed.status === 'fulfilled' && recorded.status === 'fulfilled') return armed.value;
    await this.stopWatchdog(req.domainUuid);
    await this.journal.remove(req.domainUuid);
    if (recorded.status === 'fulfilled') {
      await this.opts.obligations?.resolve(req.domainUuid, freezeId).catch(() => this.queueUnrecord(req.domainUuid, freezeId));
      throw (armed as PromiseRejectedResult).reason;
    }
    throw new ArmError(`the freeze of ${req.domainName} was not asked for: its obligation could not be recorded in Ceph (${messageOf(recorded.reason)})`, recorded.reason);
  }

  /**
   * Keeps the entry for `watchMs` more as a watch: a freeze call whose outcome was unknown may
   * still land in the guest (the agent got the command, libvirt or we gave up waiting). Creates
   * the entry when something already cleared it.
   */
  async watch(base: Pick<JournalEntry, 'domainUuid' | 'domainName' | 'owner' | 'agentTimeoutSec'>, watchMs: number): Promise<JournalEntry> {
    const previous = await this.journal.read(base.domainUuid);
    await this.stopWatchdog(base.domainUuid);
    const wall = Date.now();
    return this.start({
      domainUuid: base.domainUuid,
      domainName: base.domainName,
      owner: previous?.owner ?? base.owner,
      mode: 'watch',
      frozenAt: previous?.frozenAt ?? wall,
      deadlineAt: wall + watchMs,
      deadlineMono: monoMs() + watchMs,
      bootId: bootId(),
      agentTimeoutSec: base.agentTimeoutSec,
      guardId: randomUUID(),
      ...(previous?.freezeId ? { freezeId: previous.freezeId } : {}),
    });
  }

  /**
   * Stops the watchdog. Returns when it fired (ms since epoch), or undefined when it had not:
   * a fired guard means the guest was thawed at its deadline, whatever the caller did after.
   */
  async release(domainUuid: string): Promise<{ guardFiredAt?: number }> {
    await this.stopWatchdog(domainUuid);
    const marker = await fs.readFile(this.firedPath(domainUuid), 'utf8').catch(() => undefined);
    const firedAt = marker ? Number(marker.trim()) : undefined;
    return firedAt && Number.isFinite(firedAt) ? { guardFiredAt: firedAt } : {};
  }

  /**
   * Forgets a freeze and resolves its obligation: only after a thaw was proven where the guest
   * runs, or when the freeze was never ours (another's freeze refused ours).
   */
  async clear(domainUuid: string): Promise<void> {
    const entry = await this.journal.read(domainUuid);
    await this.journal.remove(domainUuid);
    await fs.rm(this.firedPath(domainUuid), { force: true });
    if (!entry?.freezeId) return;
    if (this.opts.longLived) await this.resolveSoon(domainUuid, entry.freezeId);
    else await this.resolve(domainUuid, entry.freezeId);
  }

  /**
   * {@link resolve}, off the caller's path (two `rados` processes, 100–300 ms, after every
   * thaw): queued in the journal dir first, as a failed removal is, then removed now in the
   * background. Until then the record says only to thaw a guest that is thawed.
   */
  private async resolveSoon(domainUuid: string, freezeId: string): Promise<void> {
    if (!this.opts.obligations) return;
    await this.queueUnrecord(domainUuid, freezeId);
    const done: Promise<void> = (this.settling.get(domainUuid) ?? Promise.resolve())
      .then(async () => void (await this.unrecordQueued(domainUuid)))
      .catch(() => undefined) // still queued: the sweeper's retry
      .finally(() => {
        if (this.settling.get(domainUuid) === done) this.settling.delete(domainUuid);
      });
    this.settling.set(domainUuid, done);
  }

  /**
   * The domain left this host (migrated, or undefined here): the host-local layers can do no
   * more for it, and the cluster-wide obligation, kept, is what the host it runs on now honours.
   * The local entry goes; the obligation stays until a thaw is proven there.
   */
  async handOver(domainUuid: string): Promise<JournalEntry | undefined> {
    const entry = await this.journal.read(domainUuid);
    await this.stopWatchdog(domainUuid);
    await this.journal.remove(domainUuid);
    await fs.rm(this.firedPath(domainUuid), { force: true });
    return entry;
  }

  /**
   * A thaw of this freeze was proven (by any layer, on any host): its obligation goes. Never
   * throws — a removal Ceph refuses now is queued in the journal dir and retried by the sweeper
   * (retryUnrecords); until then the record only says to thaw a guest that is thawed.
   */
  async resolve(domainUuid: string, freezeId?: string): Promise<void> {
    if (!this.opts.obligations) return;
    try {
      await this.opts.obligations.resolve(domainUuid, freezeId);
    } catch (err) {
      this.opts.log?.('freeze obligation not resolved yet; queued for the sweeper', { domainUuid, freezeId, error: messageOf(err) });
      await this.queueUnrecord(domainUuid, freezeId ?? '');
    }
  }

  /** Obligations whose removal failed (or is on its way), tried again. Returns how many are still queued. */
  async retryUnrecords(): Promise<number> {
    if (!this.opts.obligations) return 0;
    const names = await fs.readdir(this.journal.dir).catch(() => [] as string[]);
    let left = 0;
    for (const n of names) {
      const m = /^(.+)\.unrecord$/.exec(n);
      if (m && !(await this.unrecordQueued(m[1]))) left++;
    }
    return left;
  }

  /** The queued removal of a domain's obligation, tried once; false when it is still queued. */
  private async unrecordQueued(domainUuid: string): Promise<boolean> {
    if (!this.opts.obligations) return true;
    const file = path.join(this.journal.dir, `${domainUuid}.unrecord`);
    const queued = () => fs.readFile(file, 'utf8').then((t) => t.trim(), () => undefined);
    const freezeId = await queued();
    if (freezeId === undefined) return true; // done meanwhile (the sweeper's retry)
    try {
      await this.opts.obligations.resolve(domainUuid, freezeId || undefined);
    } catch (err) {
      this.opts.log?.('freeze obligation not resolved yet; queued for the sweeper', { domainUuid, freezeId, error: messageOf(err) });
      return false;
    }
    // A newer freeze's queued removal may have replaced this one meanwhile: it stays queued.
    if ((await queued()) === freezeId) await fs.rm(file, { force: true });
    return true;
  }

  /** The cluster-wide obligations, for arrivals and the freeze step's check; [] without a store. */
  obligations(): Promise<FreezeObligation[]> {
    return this.opts.obligations?.all() ?? Promise.resolve([]);
  }

  /** For a late-freeze watch's entry: another run's live window on its guest, which it must leave (src/safety/late-freeze.ts). */
  otherRunsWindow(lv: LibvirtClient, entry: JournalEntry): Promise<FreezeObligation | undefined> {
    return anotherRunsWindow(lv, entry, this.opts.obligations, this.opts.clockSkewMs ?? 1000);
  }

  obligationOf(domainUuid: string): Promise<FreezeObligation | undefined> {
    return this.opts.obligations?.read(domainUuid) ?? Promise.resolve(undefined);
  }

  private async queueUnrecord(domainUuid: string, freezeId: string): Promise<void> {
    await fs.mkdir(this.journal.dir, { recursive: true });
    await fs.writeFile(path.join(this.journal.dir, `${domainUuid}.unrecord`), freezeId).catch(() => undefined);
  }

  read(domainUuid: string): Promise<JournalEntry | undefined> {
    return this.journal.read(domainUuid);
  }

  entries(): Promise<JournalEntry[]> {
    return this.journal.entries();
  }

  /** Late freezes the watchdogs thawed since the last call (for the metrics and the log). */
  async takeLateThaws(): Promise<{ domainUuid: string; at: number }[]> {
    const names = await fs.readdir(this.journal.dir).catch(() => [] as string[]);
    const out: { domainUuid: string; at: number }[] = [];
    for (const n of names) {
      const m = /^(.+)\.late-(\d+)$/.exec(n);
      if (!m) continue;
      await fs.rm(path.join(this.journal.dir, n), { force: true });
      out.push({ domainUuid: m[1], at: Number(m[2]) });
    }
    return out;
  }

  /**
   * Proves the watchdog can run on this host (doctor): the same command a freeze spawns, in its
   * self-check mode, which loads the libvirt client and connects to libvirtd.
   */
  async check(timeoutMs = 20_000): Promise<string> {
    const { file, execArgv } = nodeEntry(__dirname, 'watchdog', __filename);
    const { stdout } = await promisify(execFile)(process.execPath, [...execArgv, file, '--check', this.opts.libvirtUri], { timeout: timeoutMs });
    return stdout.trim();
  }

  private async start(entry: JournalEntry): Promise<JournalEntry> {
    const args: WatchdogArgs = {
      uri: this.opts.libvirtUri,
      stateDir: this.opts.stateDir,
      domainUuid: entry.domainUuid,
      domainName: entry.domainName,
      guardId: entry.guardId,
      mode: entry.mode,
      deadlineMono: entry.deadlineMono,
      agentTimeoutSec: entry.agentTimeoutSec,
      ...(entry.freezeId ? { freezeId: entry.freezeId } : {}),
      ...(entry.mode === 'watch' && this.opts.obligationSource ? { obligations: this.opts.obligationSource, clockSkewMs: this.opts.clockSkewMs ?? 1000 } : {}),
    };
    const standbyPid = await this.standbys?.arm(args, WATCHDOG_READY_WAIT_MS);
    if (standbyPid) {
      const journaled: JournalEntry = { ...entry, guardPid: standbyPid };
      await this.journal.write(journaled);
      return journaled;
    }
    // The arguments travel as one JSON argv element; fd 3 is the pipe it says "up" on.
    const child = spawnWatchdog([JSON.stringify({ ...args, readyFd: 3 })]);
    // Its start-up must not run beside the freeze: a freeze asked for while the watchdog still
    // boots took 1.18x as long, and the guest stalled 1.12x as long (bench/guard-cost.ts). The
    // wait comes out of the deadline (fixed above), before the freeze instead of inside its window.
    await startedUp(child.stdio[3] as Readable | null, WATCHDOG_READY_WAIT_MS);
    const journaled: JournalEntry = { ...entry, guardPid: child.pid };
    await this.journal.write(journaled);
    return journaled;
  }

  private async stopWatchdog(domainUuid: string): Promise<void> {
    const entry = await this.journal.read(domainUuid);
    if (entry?.guardPid) killGroup(entry.guardPid);
  }

  private firedPath(uuid: string): string {
    return firedMarkerPath(this.opts.stateDir, uuid);
  }
}

/** Bound on the wait for a watchdog's start-up: past it the freeze goes ahead, as it always could. */
const WATCHDOG_READY_WAIT_MS = 1500;

/** Resolves on the watchdog's "up" line, its pipe closing (it exited or failed), or after `ms`. */
function startedUp(pipe: Readable | null, ms: number): Promise<void> {
  if (!pipe) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      pipe.destroy();
      resolve();
    };
    const timer = setTimeout(done, ms);
    pipe.once('data', done);
    pipe.once('close', done);
    pipe.once('error', done);
  });
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

