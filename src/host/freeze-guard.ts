import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { bootId, monoMs } from './clock';
import { FreezeJournal, firedMarkerPath } from './freeze-journal';
import type { JournalEntry, JournalLogger } from './freeze-journal';
import { nodeEntry } from './node-entry';
import type { WatchdogArgs } from './watchdog-args';

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
}

export interface ArmRequest {
  domainUuid: string;
  domainName: string;
  owner: string;
  deadlineMs: number;
  agentTimeoutSec: number;
  previousAgentTimeout?: number;
}

export class FreezeGuard {
  readonly journal: FreezeJournal;
  constructor(private readonly opts: FreezeGuardOptions) {
    this.journal = new FreezeJournal(opts.stateDir, opts.log);
  }

  /** Journals the freeze and starts its watchdog. Call before virDomainFSFreeze. */
  async arm(req: ArmRequest): Promise<JournalEntry> {
    // A watchdog left by an earlier attempt (dead worker, replayed task) must not fire into this freeze.
    await this.stopWatchdog(req.domainUuid);
    await fs.rm(this.firedPath(req.domainUuid), { force: true });
    const wall = Date.now();
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
      ...(req.previousAgentTimeout !== undefined ? { previousAgentTimeout: req.previousAgentTimeout } : {}),
    };
    return this.start(entry);
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

  /** Forgets a freeze. Only after a thaw was proven or the domain is gone. */
  async clear(domainUuid: string): Promise<void> {
    await this.journal.remove(domainUuid);
    await fs.rm(this.firedPath(domainUuid), { force: true });
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
    };
    const { file, execArgv } = nodeEntry(__dirname, 'watchdog', __filename);
    // Detached into its own session: a worker that dies (or a stop of the worker's process only)
    // leaves it running. Not a shell: the arguments travel as one JSON argv element. fd 3 is the
    // pipe it says "up" on.
    const child = spawn(process.execPath, [...execArgv, file, JSON.stringify({ ...args, readyFd: 3 })], {
      detached: true,
      stdio: ['ignore', 'ignore', 'ignore', 'pipe'],
    });
    child.unref();
    // Its start-up (a Node process) must not take CPU from the guest's freeze right after it.
    if (child.pid) {
      try {
        os.setPriority(child.pid, 10);
      } catch {
        // not permitted here: it then starts at the worker's priority
      }
    }
    // Nor run beside it at all: a freeze asked for while the watchdog still boots took 1.18x as
    // long, and the guest stalled 1.12x as long (bench/guard-cost.ts). The wait comes out of
    // the deadline (fixed above), before the freeze instead of inside its window.
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

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone: it fired and finished, or was released earlier.
  }
}
