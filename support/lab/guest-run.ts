/**
 * Runs a command in a lab guest through its agent (guest-exec, then guest-exec-status until it
 * exits) and says how long it took on the host clock: the write-load lane's writers (dirty-writer.ts)
 * in the bench and the pre-flush tests. Nothing here is the product's pre-flush (activities/pre-flush.ts).
 */
import type { DomainRef, LibvirtClient } from '../../src/libvirt';
import { nowMs } from '../../src/host/clock';

export interface GuestRun {
  code: number | undefined;
  stdout: string;
  stderr: string;
  /** Host clock: guest-exec sent → guest-exec-status said exited. */
  startedAt: number;
  exitedAt: number;
  ms: number;
}

/** `/bin/busybox sh -c SCRIPT` in the guest: the lab guest's one shell (lab/guest-image.sh). */
export function busyboxSh(script: string): string[] {
  return ['/bin/busybox', 'sh', '-c', script];
}

export async function runInGuest(lv: LibvirtClient, dom: DomainRef, argv: readonly string[], o: { timeoutMs: number; pollMs?: number }): Promise<GuestRun> {
  const startedAt = nowMs();
  const pid = await lv.guestExec(dom, argv, 5, { captureOutput: true });
  const deadline = startedAt + o.timeoutMs;
  // Short polls first: a sync of nothing exits within a few ms, and the poll's grain is added to
  // every figure the bench derives from it.
  let wait = 5;
  for (;;) {
    const s = await lv.guestExecStatus(dom, pid, 5);
    if (s.exited) {
      const exitedAt = nowMs();
      return { code: s.exitCode ?? (s.signal !== undefined ? 128 + s.signal : undefined), stdout: s.stdout ?? '', stderr: s.stderr ?? '', startedAt, exitedAt, ms: exitedAt - startedAt };
    }
    if (nowMs() > deadline) throw new Error(`${argv.join(' ')} still running in ${dom.name} after ${o.timeoutMs} ms (guest pid ${pid})`);
    await sleep(wait);
    wait = Math.min(o.pollMs ?? 50, wait * 2);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
