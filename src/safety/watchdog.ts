/*
 * The freeze guard's watchdog: a detached Node process per armed freeze (see freeze-guard.ts).
 * It holds no libvirt connection until it has to act, and acts only while the journal entry still
 * names its guard id, so a released or re-armed guard can never thaw a later freeze.
 *
 *   window: sleep until the deadline (monotonic clock), record that the guard fired, then thaw and
 *           confirm, retrying with backoff until the guest says `thawed` or the domain is gone.
 *   watch:  until the deadline, poll guest-fsfreeze-status; a freeze that lands late is thawed
 *           (and recorded as `<uuid>.late-<ms>` for the worker's metrics) — unless it is another
 *           run's recorded window (late-freeze.ts), which is left to that run's guard. At the end
 *           the entry is removed.
 */
import { closeSync, writeSync } from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { Socket } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { LibvirtClient } from '../libvirt';
import { monoMs } from '../host/clock';
import { FreezeJournal, firedMarkerPath } from './freeze-journal';
import { thawAndConfirm } from './thaw-confirm';
import { recordedOtherWindow } from './late-freeze';
import { ObligationStore } from './obligation-store';
import type { WatchdogArgs } from './watchdog-args';
import { STANDBY_IDLE_MS } from './watchdog-standby';

const WATCH_POLL_MS = 250;
/** The guard's wait for our "up" (freeze-guard.ts, 1.5 s) and its journal write, with room to spare. */
const JOURNALED_WAIT_MS = 5000;

async function main(argv: string[]): Promise<number> {
  if (argv[0] === '--check') return selfCheck(argv[1]);
  if (argv[0] === '--standby') {
    const a = await standBy(Number(argv[1]) || STANDBY_IDLE_MS);
    return a ? watch(a) : 0;
  }
  const a = JSON.parse(argv[0] ?? '') as WatchdogArgs;
  if (a.readyFd !== undefined) announceReady(a.readyFd);
  return watch(a);
}

async function watch(a: WatchdogArgs): Promise<number> {
  const journal = new FreezeJournal(a.stateDir);
  const stillOurs = async () => (await journal.read(a.domainUuid))?.guardId === a.guardId;
  const log = (message: string, fields: Record<string, unknown> = {}) =>
    appendFile(
      path.join(a.stateDir, 'guard.log'),
      JSON.stringify({ time: new Date().toISOString(), message, domain: a.domainName, mode: a.mode, guardId: a.guardId, ...fields }) + '\n',
    ).catch(() => undefined);
  let lv: LibvirtClient | undefined;
  const libvirt = async () => (lv ??= await LibvirtClient.connect({ uri: a.uri, callTimeoutMs: a.agentTimeoutSec * 1000 + 5000 }));
  try {
    if (a.mode === 'window') {
      await sleep(Math.max(0, a.deadlineMono - monoMs()));
      if (!(await stillOurs())) return 0;
      await writeFile(firedMarkerPath(a.stateDir, a.domainUuid), String(Date.now()));
      await log('guard fired at the freeze deadline; thawing');
      await thawUntilProven(a, libvirt, stillOurs, log, () => {
        void lv?.close().catch(() => undefined);
        lv = undefined;
      });
      return 0;
    }
    // The guard journals this watch right after our "up": until it has, the entry names the
    // watchdog before us (or nothing), and a watch that took that for "released" would end unserved.
    if (!(await journaledWithin(stillOurs, JOURNALED_WAIT_MS))) return 0;
    const obligations = a.obligations ? new ObligationStore(a.obligations.cli, a.obligations.pool) : undefined;
    let left: string | undefined;
    while (monoMs() < a.deadlineMono) {
      if (!(await stillOurs())) return 0;
      try {
        const c = await libvirt();
        const dom = await c.lookupDomainByUuid(a.domainUuid);
        if ((await c.fsFreezeStatus(dom, a.agentTimeoutSec)) === 'frozen') {
          const other = await recordedOtherWindow(a, obligations, a.clockSkewMs ?? 1000);
          if (other) {
            if (left !== other.freezeId) await log("another run's freeze window; left to its guard, still watching", { otherFreezeId: other.freezeId, otherOwner: other.owner });
            left = other.freezeId;
            await sleep(WATCH_POLL_MS);
            continue;
          }
          const r = await thawAndConfirm(c, a.domainUuid, a.agentTimeoutSec);
          await writeFile(path.join(journal.dir, `${a.domainUuid}.late-${Date.now()}`), JSON.stringify(r));
          await log('a freeze landed after its run gave up on it; thawed', { result: r });
        }
      } catch {
        // Unknown this round (libvirtd restarting, agent busy with the late freeze): poll again.
      }
      await sleep(WATCH_POLL_MS);
    }
    if (await stillOurs()) await journal.remove(a.domainUuid);
    return 0;
  } finally {
    await lv?.close().catch(() => undefined);
  }
}

async function thawUntilProven(
  a: WatchdogArgs,
  libvirt: () => Promise<LibvirtClient>,
  stillOurs: () => Promise<boolean>,
  log: (m: string, f?: Record<string, unknown>) => Promise<void>,
  dropConnection: () => void,
): Promise<void> {
  let backoffMs = 500;
  for (let attempt = 1; ; attempt++) {
    try {
      const r = await thawAndConfirm(await libvirt(), a.domainUuid, a.agentTimeoutSec);
      await log('guard thaw proven', { result: r, attempt });
      return;
    } catch (err) {
      await log('guard thaw not proven yet; retrying', { attempt, error: err instanceof Error ? err.message : String(err) });
      dropConnection();
    }
    await sleep(backoffMs);
    backoffMs = Math.min(backoffMs * 2, 5000);
    // Someone else proved the thaw and cleared the entry (the run, the sweeper, an operator).
    if (!(await stillOurs())) return;
  }
}

async function journaledWithin(stillOurs: () => Promise<boolean>, ms: number): Promise<boolean> {
  const until = monoMs() + ms;
  for (;;) {
    if (await stillOurs()) return true;
    if (monoMs() >= until) return false;
    await sleep(20);
  }
}

/**
 * A standby (watchdog-standby.ts): up, then waits for its arguments on fd 3 and acknowledges them.
 * Undefined — exit — when the pipe ends first (the worker died or let it go) or nobody came in
 * `idleMs`: until armed it guards nothing.
 */
function standBy(idleMs: number): Promise<WatchdogArgs | undefined> {
  return new Promise((resolve) => {
    let pipe: Socket;
    try {
      pipe = new Socket({ fd: 3, readable: true, writable: true });
    } catch {
      resolve(undefined);
      return;
    }
    let buffered = '';
    let settled = false;
    const finish = (a: WatchdogArgs | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(a);
    };
    const timer = setTimeout(() => {
      pipe.destroy();
      finish(undefined);
    }, idleMs);
    pipe.setEncoding('utf8');
    pipe.on('data', (d: string) => {
      buffered += d;
      const i = buffered.indexOf('\n');
      if (i < 0) return;
      let a: WatchdogArgs | undefined;
      try {
        a = JSON.parse(buffered.slice(0, i)) as WatchdogArgs;
      } catch {
        a = undefined;
      }
      // The ack may find the guard gone (it stopped waiting): the arguments are what count.
      if (a) pipe.end('armed\n');
      else pipe.destroy();
      finish(a);
    });
    pipe.on('end', () => finish(undefined));
    pipe.on('error', () => finish(undefined));
    pipe.on('close', () => finish(undefined));
    pipe.write('up\n');
  });
}

/** Start-up (loading Node and this module) is done: the guard may let the freeze go now. */
function announceReady(fd: number): void {
  try {
    writeSync(fd, 'up\n');
    closeSync(fd);
  } catch {
    // The guard stopped waiting (or died): it is the deadline that matters, not the greeting.
  }
}

async function selfCheck(uri: string | undefined): Promise<number> {
  if (!uri) return 0;
  const c = await LibvirtClient.connect({ uri, callTimeoutMs: 10_000 });
  await c.close();
  process.stdout.write(`watchdog ok: ${process.execPath} ${process.version}, libvirt reachable\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`vmsnap watchdog: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
