import { Context } from '@temporalio/activity';
import type { DomainRef, LibvirtClient } from '../src/libvirt';
import { monoMs, nowMs } from '../src/host/clock';
import { exitOutcome, freezeNeedsMs, PRE_FLUSH_AGENT_CALL_SEC, PRE_FLUSH_CALL_TIMEOUT_MS, pollDelayMs, preFlushBudgetMs, shorten } from '../src/model/pre-flush';
import type { PreFlushResult } from '../src/model/pre-flush';
import type { FreezeRequest } from '../src/model/types';
import type { ActivityDeps } from './deps';

/**
 * The freeze activity's pre-flush, when the worker has one configured (config preFlushTimeoutMs):
 * within what the activity can spare, logged and counted whatever its outcome — it never fails
 * the freeze. Undefined when the worker has none.
 */
export async function preFlushBeforeFreeze(
  deps: ActivityDeps,
  lv: LibvirtClient,
  dom: DomainRef,
  req: FreezeRequest,
  activityLeftMs: number | undefined,
): Promise<PreFlushResult | undefined> {
  const settings = deps.preFlush;
  if (!settings) return undefined;
  const budget = preFlushBudgetMs({ timeoutMs: settings.timeoutMs, activityLeftMs, freezeNeedsMs: freezeNeedsMs(req.agentTimeoutSec) });
  const r: PreFlushResult =
    budget > 0
      ? await preFlushGuest(lv, dom, settings.command, budget)
      : { outcome: 'skipped', startedAt: nowMs(), returnedAt: nowMs(), ms: 0, error: `the freeze activity has no ${settings.timeoutMs} ms to spare (${activityLeftMs} ms left)` };
  deps.metrics.preFlush.observe({ outcome: r.outcome }, r.ms / 1000);
  const fields = { domain: req.domainName, outcome: r.outcome, ms: Math.round(r.ms), ...(r.error ? { error: r.error } : {}) };
  if (r.outcome === 'done') deps.log.info('pre-flush done before the freeze', fields);
  else deps.log.warn('pre-flush did not finish; freezing anyway', fields);
  return r;
}

/** What is left of this activity's start-to-close limit since `startedMono`; undefined outside an activity. */
export function activityTimeLeft(startedMono: number): () => number | undefined {
  let limit: number | undefined;
  try {
    limit = Context.current().info.startToCloseTimeoutMs || undefined;
  } catch {
    limit = undefined; // not in an activity (unit tests call activities directly)
  }
  return () => (limit === undefined ? undefined : limit - (monoMs() - startedMono));
}

/**
 * The pre-flush (src/model/pre-flush.ts): qemu-ga `guest-exec` of the command, then
 * `guest-exec-status` until it exits or `waitMs` has passed. Never throws: whatever the guest, the
 * agent or libvirtd do, it answers with an outcome within `waitMs` plus one agent call's limit, and
 * the freeze goes on. A command still running at the end is left to finish in the guest (the agent
 * has no way to stop it); a sync that finishes beside the freeze only takes work off it.
 */
export async function preFlushGuest(lv: LibvirtClient, dom: DomainRef, command: readonly string[], waitMs: number): Promise<PreFlushResult> {
  const startedAt = nowMs();
  const t0 = monoMs();
  const left = () => waitMs - (monoMs() - t0);
  const end = (r: Pick<PreFlushResult, 'outcome' | 'exitCode' | 'error'>): PreFlushResult => {
    const returnedAt = nowMs();
    return { ...r, startedAt, returnedAt, ms: returnedAt - startedAt };
  };
  const call = { timeoutMs: PRE_FLUSH_CALL_TIMEOUT_MS };
  let pid: number;
  try {
    pid = await lv.guestExec(dom, command, PRE_FLUSH_AGENT_CALL_SEC, { ...call, captureOutput: true });
  } catch (err) {
    return end({ outcome: 'failed', error: shorten(`guest-exec ${command.join(' ')}: ${messageOf(err)}`) });
  }
  for (let n = 0; ; n++) {
    if (left() <= 0) return end({ outcome: 'timeout', error: `${command.join(' ')} still running after ${waitMs} ms (guest pid ${pid})` });
    await sleep(pollDelayMs(n, left()));
    try {
      const s = await lv.guestExecStatus(dom, pid, PRE_FLUSH_AGENT_CALL_SEC, call);
      if (s.exited) return end(exitOutcome(s));
    } catch (err) {
      return end({ outcome: 'failed', error: shorten(`guest-exec-status ${pid}: ${messageOf(err)}`) });
    }
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
