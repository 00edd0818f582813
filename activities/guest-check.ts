import { Context } from '@temporalio/activity';
import type { CheckOutcome } from '../src/model/verification';
import type { RestorePlan } from '../src/model/restore-point';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

export interface GuestCheckRequest {
  workflowId: string;
  plan: RestorePlan;
  argv: string[];
  timeoutMs: number;
}

const OUTPUT_LIMIT = 2048;

/**
 * Runs argv in a restored copy through its agent (guest-exec, capture-output; the agent searches
 * PATH) until it exits 0, again every 2 s while timeoutMs lasts: the agent answers before the
 * guest's services are up, so a first "not ready" is not a verdict. The check's failing is an
 * outcome, not an error: the last run's exit code (127 with the agent's message when it could
 * not start the command; `null` when the last run was still going at the deadline — the copy is
 * destroyed next, with it). Only an unreachable libvirtd fails the activity.
 */
export function runGuestCheck(deps: ActivityDeps) {
  return async function runGuestCheck(req: GuestCheckRequest): Promise<CheckOutcome> {
    const lv = await deps.libvirt();
    const dom = await during('look up domain', () => lv.lookupDomainByUuid(req.plan.domain.uuid));
    const [path, ...arg] = req.argv as [string, ...string[]];
    const t0 = Date.now();
    const left = () => req.timeoutMs - (Date.now() - t0);
    let attempts = 0;
    const outcome = (code: number | null, output: string): CheckOutcome => ({ argv: req.argv, code, ms: Date.now() - t0, attempts, output: output.slice(0, OUTPUT_LIMIT) });
    for (;;) {
      attempts++;
      const last = await runOnce();
      if (last.code === 0 || left() <= RETRY_MS) return outcome(last.code, last.output);
      heartbeat({ attempts, last: last.code });
      await sleep(RETRY_MS);
    }

    async function runOnce(): Promise<{ code: number | null; output: string }> {
      let pid: number;
      try {
        pid = ((await lv.qemuAgentCommand(dom, { execute: 'guest-exec', arguments: { path, arg, 'capture-output': true } }, 10)) as { pid: number }).pid;
      } catch (err) {
        return { code: 127, output: `guest-exec ${path}: ${err instanceof Error ? err.message : String(err)}` };
      }
      while (left() > 0) {
        heartbeat({ attempts, waitedMs: Date.now() - t0 });
        await sleep(Math.min(500, Math.max(0, left())));
        const s = (await during('guest-exec-status', () => lv.qemuAgentCommand(dom, { execute: 'guest-exec-status', arguments: { pid } }, 10))) as ExecStatus;
        if (!s.exited) continue;
        const text = (b?: string) => (b ? Buffer.from(b, 'base64').toString('utf8') : '');
        return { code: s.exitcode ?? (s.signal !== undefined ? 128 + s.signal : -1), output: text(s['out-data']) + text(s['err-data']) };
      }
      return { code: null, output: `still running after ${req.timeoutMs} ms` };
    }
  };
}

const RETRY_MS = 2000;

interface ExecStatus {
  exited: boolean;
  exitcode?: number;
  signal?: number;
  'out-data'?: string;
  'err-data'?: string;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function heartbeat(details: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // outside an activity (tests)
  }
}
