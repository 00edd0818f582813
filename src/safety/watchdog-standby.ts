import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import type { Socket } from 'node:net';
import { nodeEntry } from '../host/node-entry';
import type { WatchdogArgs } from './watchdog-args';

/**
 * Watchdog processes started ahead of the freeze that will need them. Starting a Node process is
 * most of what arming a freeze costs (130–380 ms here, more under load), and that time sits between
 * a run's turn and its freeze call. A run asks for one when it begins ({@link prewarm}); by the
 * time it freezes, the watchdog is up and is only handed its arguments over its pipe.
 *
 * A standby is the same detached process a freshly spawned watchdog is (own session, so it
 * outlives the worker once armed). Until it is armed it does nothing and holds no connection: it
 * exits when its pipe closes (the worker died or let it go) or after {@link STANDBY_IDLE_MS}.
 */
export class WatchdogStandbys {
  private readonly ready: Standby[] = [];
  private booting = 0;
  private closed = false;
  /** Told when a standby comes up (or fails to): an arm waiting for one that is starting. */
  private readonly upWaiters = new Set<() => void>();

  constructor(private readonly max: number) {}

  /** Starts one more standby when fewer than `max` are up or on their way. Never waits. */
  prewarm(): void {
    if (this.closed || this.ready.length + this.booting >= this.max) return;
    this.booting++;
    const s = startStandby();
    void s.up.then((ok) => {
      this.booting--;
      if (ok && s.alive() && !this.closed) this.ready.push(s);
      else s.dismiss();
      for (const w of [...this.upWaiters]) w();
    });
  }

  /**
   * Hands `args` to a standby that is up. Its pid once it acknowledged them (or while its ack is
   * late: it has them in its pipe, as a fresh watchdog has them in its argv); undefined when none
   * was up or it had gone, and the caller spawns one as before.
   */
  async arm(args: WatchdogArgs, waitMs: number): Promise<number | undefined> {
    // One still starting is waited for (within the same bound a fresh one gets): starting a
    // second process beside it would put two start-ups next to the freeze instead of none.
    if (!this.ready.length && this.booting) await this.someUp(waitMs);
    for (let s = this.take(); s; s = this.take()) {
      const armed = await s.arm(args, waitMs);
      if (armed) return s.pid;
    }
    return undefined;
  }

  private someUp(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.upWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.upWaiters.add(done);
    });
  }

  /** How many are up and unused (doctor-style checks, tests). */
  get up(): number {
    return this.ready.length;
  }

  /** Lets every idle standby go, and those still starting once up; no more are started. */
  close(): void {
    this.closed = true;
    for (const s of this.ready.splice(0)) s.dismiss();
  }

  private take(): Standby | undefined {
    for (;;) {
      const s = this.ready.shift();
      if (!s) return undefined;
      if (s.alive() && Date.now() - s.upAt < STANDBY_IDLE_MS - STANDBY_MARGIN_MS) return s;
      s.dismiss();
    }
  }
}

/** How long an unused standby waits before it exits on its own (it holds ~40 MiB). */
export const STANDBY_IDLE_MS = 120_000;
/** A standby this close to its own exit is not handed a freeze. */
const STANDBY_MARGIN_MS = 10_000;
/** Bound on a standby's start-up: a standby that is not up by then is let go. */
const STANDBY_BOOT_MS = 10_000;

interface Standby {
  pid: number | undefined;
  upAt: number;
  up: Promise<boolean>;
  alive(): boolean;
  arm(args: WatchdogArgs, waitMs: number): Promise<boolean>;
  dismiss(): void;
}

function startStandby(): Standby {
  // fd 3 is the pipe it says "up" on, reads its arguments from and acknowledges them on.
  const child = spawnWatchdog(['--standby', String(STANDBY_IDLE_MS)]);
  const pipe = child.stdio[3] as Socket | null;
  pipe?.unref();
  let closed = !pipe;
  let buffered = '';
  const lines: ((line: string | undefined) => void)[] = [];
  const deliver = () => {
    for (let i = buffered.indexOf('\n'); i >= 0 && lines.length; i = buffered.indexOf('\n')) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      lines.shift()!(line);
    }
    if (closed) for (const l of lines.splice(0)) l(undefined);
  };
  pipe?.setEncoding('utf8');
  pipe?.on('data', (d: string) => {
    buffered += d;
    deliver();
  });
  const onEnd = () => {
    closed = true;
    deliver();
  };
  pipe?.on('close', onEnd);
  pipe?.on('error', onEnd);
  child.on('exit', onEnd);
  const nextLine = (ms: number, keepAlive = false) =>
    new Promise<string | undefined | 'late'>((resolve) => {
      const timer = setTimeout(() => {
        const i = lines.indexOf(take);
        if (i >= 0) lines.splice(i, 1);
        resolve('late');
      }, ms);
      if (!keepAlive) timer.unref();
      const take = (line: string | undefined) => {
        clearTimeout(timer);
        resolve(line);
      };
      lines.push(take);
      deliver();
    });
  const dismiss = () => {
    closed = true;
    pipe?.destroy();
    if (child.pid) killGroup(child.pid);
  };
  const s: Standby = {
    pid: child.pid,
    upAt: 0,
    alive: () => !closed,
    up: nextLine(STANDBY_BOOT_MS).then((line) => {
      if (line !== 'up') {
        dismiss();
        return false;
      }
      s.upAt = Date.now();
      return true;
    }),
    async arm(args, waitMs) {
      if (closed || !pipe) return false;
      pipe.ref(); // a freeze waits on the answer: it must keep this process up
      pipe.write(JSON.stringify(args) + '\n');
      const ack = await nextLine(waitMs, true);
      if (ack === undefined) return false; // gone before it took them
      pipe.destroy(); // armed (or arming): from here the pipe's end means nothing to it
      return true;
    },
    dismiss,
  };
  return s;
}

/**
 * A watchdog process, as every arm starts one: detached into its own session (a worker that dies,
 * or a stop of the worker's process only, leaves it running), not a shell (its arguments travel as
 * argv elements), fd 3 a pipe, and niced: its start-up must not take CPU from a guest's freeze.
 */
export function spawnWatchdog(argv: string[]): ChildProcess {
  const { file, execArgv } = nodeEntry(__dirname, 'watchdog', __filename);
  const child = spawn(process.execPath, [...execArgv, file, ...argv], { detached: true, stdio: ['ignore', 'ignore', 'ignore', 'pipe'] });
  child.unref();
  if (child.pid) {
    try {
      os.setPriority(child.pid, 10);
    } catch {
      // not permitted here: it runs at the worker's priority
    }
  }
  return child;
}

/** SIGKILL to a watchdog's process group (its session: it and anything it started). */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
