import { activityInfo } from '@temporalio/activity';
import { monoMs, nowMs } from '../src/host/clock';
import { restoreAgentTimeout } from '../src/safety/agent-timeout-restore';
import { thawAndConfirm } from '../src/safety/thaw-confirm';
import { isOverdue } from '../src/safety/freeze-journal';
import type { ThawOutcome } from '../src/safety/thaw-confirm';
import { FailureType } from '../src/model/failures';
import type { ThawRequest, ThawResult } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

/**
 * The run's thaw: the host's one thaw-and-confirm, then the guard is released and the journal
 * entry cleared — or, after a freeze whose outcome is unknown, turned into a late-freeze watch.
 * Idempotent — thawing a thawed guest returns 0, which is also how the workflow learns that
 * somebody else thawed first.
 */
export function thawGuest(deps: ActivityDeps) {
  return async function thawGuest(req: ThawRequest): Promise<ThawResult> {
    // Hand-off thaws still arrive as thawGuest: from thawWherever histories recorded without the
    // 'vmsnap-handoff-activity' patch, and from the fallback for a host on an older release. Keep
    // this until every worker runs a release with thawArrivedGuest and no thawWherever begun before
    // that is open (`vmsnap-handoff-*` time out after 5 min; a run's `.handoff.` child ends with its
    // run); then the workflow's fallback and this line go together, and the patch is deprecated.
    if (req.thawedBy === 'handoff') return thawArrived(deps, req);
    return thawHere(deps, req);
  };
}

export type ArrivedThawRequest = Omit<ThawRequest, 'thawedBy' | 'lateFreezeWatchMs'>;

/**
 * The hand-off's thaw (workflows/thaw-wherever.ts), on the host a frozen guest migrated to: the
 * run's thaw with layer `handoff` — unless this host has frozen the guest itself since it arrived.
 */
export function thawArrivedGuest(deps: ActivityDeps) {
  return async function thawArrivedGuest(req: ArrivedThawRequest): Promise<ThawResult> {
    return thawArrived(deps, { ...req, thawedBy: 'handoff' });
  };
}

async function thawArrived(deps: ActivityDeps, req: ThawRequest): Promise<ThawResult> {
  const local = await deps.guard.read(req.domainUuid);
  // Only a live window of ANOTHER freeze is this host's own run's to end (thawing would cut its
  // snapshot short). The same freeze back on its freezing host (A → B → A) is thawed here.
  const sameFreeze = req.freezeId ? local?.freezeId === req.freezeId : local?.owner === req.owner;
  if (local && local.mode === 'window' && !isOverdue(local) && !sameFreeze) {
    const t = nowMs();
    deps.log.warn('hand-off thaw skipped: this host holds its own freeze of the domain', { domain: req.domainName, owner: req.owner, localOwner: local.owner });
    return { thawedFilesystems: 0, startedAt: t, returnedAt: t, skippedForLocalFreeze: true };
  }
  return thawHere(deps, req);
}

async function thawHere(deps: ActivityDeps, req: ThawRequest): Promise<ThawResult> {
  const lv = await deps.libvirt();
  const startedAt = nowMs();
  const startedMono = monoMs();
  // Retryable always: the retry policy (and, past it, escalation) is the workflow's decision.
  const r: ThawOutcome = await during(`thaw ${req.domainName} (attempt ${attempt()})`, () => thawAndConfirm(lv, req.domainUuid, req.agentTimeoutSec), {
    type: FailureType.ThawFailed,
    nonRetryable: false,
  });
  const returnedAt = nowMs();
  const returnedMono = monoMs();
  const journaled = await deps.guard.read(req.domainUuid);
  const { guardFiredAt } = await deps.guard.release(req.domainUuid);
  if (journaled && r.outcome === 'thawed') {
    const warning = await restoreAgentTimeout(lv, journaled);
    if (warning) deps.log.warn(warning, { domain: req.domainName });
  }
  if (r.outcome === 'gone') {
    // Gone from this host is not thawed: a live migration carries a frozen guest along. The
    // entry stays (guard stopped) until the run's hand-off proves the thaw elsewhere and calls
    // forgetFreeze, or, past the deadline, the sweeper hands it off itself.
  } else if (req.lateFreezeWatchMs && r.outcome === 'thawed') {
    await deps.guard.watch(
      { domainUuid: req.domainUuid, domainName: req.domainName, owner: req.owner ?? workflowIdOrNone() ?? 'unknown', agentTimeoutSec: req.agentTimeoutSec },
      req.lateFreezeWatchMs,
    );
  } else {
    await deps.guard.clear(req.domainUuid);
  }
  if (r.outcome === 'thawed') {
    // The obligation goes with the proven thaw (clear resolved the journaled one already).
    const open = req.freezeId ?? (req.lateFreezeWatchMs ? journaled?.freezeId : undefined);
    if (open) await deps.guard.resolve(req.domainUuid, open);
  }
  if (journaled?.mode === 'window') {
    // The window ends here: at the guard's thaw when it fired first, else at this one. A guest
    // that left this host frozen ends its window where it runs now.
    const endedAt = guardFiredAt ?? (r.outcome === 'thawed' ? r.thawedAt : undefined);
    if (endedAt !== undefined) deps.metrics.freezeWindowEnded(journaled, endedAt);
    else deps.metrics.freezeWindowLeft(journaled.freezeId);
  }
  const thawedFilesystems = r.outcome === 'thawed' ? r.thawedFilesystems : 0;
  const layer = guardFiredAt ? 'guard' : req.thawedBy;
  deps.metrics.thaws.inc({ layer });
  deps.log.info('guest thawed', {
    domain: req.domainName,
    layer,
    thawedFilesystems,
    guardFiredAt,
    ...(r.outcome === 'gone' ? { gone: r.reason } : {}),
    ...(req.lateFreezeWatchMs ? { lateFreezeWatchMs: req.lateFreezeWatchMs } : {}),
  });
  return {
    thawedFilesystems,
    startedAt,
    returnedAt,
    startedMono,
    returnedMono,
    afterMs: nowMs() - (r.outcome === 'thawed' ? r.thawedAt : returnedAt),
    ...(r.outcome === 'thawed' ? { thawedAt: r.thawedAt } : {}),
    ...(guardFiredAt ? { guardFiredAt } : {}),
    ...(r.outcome === 'gone' ? { domainGone: true } : {}),
  };
}

/**
 * The run's guest left this host frozen: this host's part ends (watchdog stopped, journal entry
 * gone) and the freeze's obligation, kept, is handed to the host the guest runs on now and to the
 * run's hand-off workflow.
 */
export function forgetFreeze(deps: ActivityDeps) {
  return async function forgetFreeze(req: { domainUuid: string; owner: string }): Promise<{ forgotten: boolean }> {
    const entry = await deps.guard.read(req.domainUuid);
    // Only the run's own entry: a newer freeze of this domain on this host is somebody's window.
    if (!entry || entry.owner !== req.owner) return { forgotten: false };
    await deps.guard.handOver(req.domainUuid);
    if (entry.mode === 'window') deps.metrics.freezeWindowLeft(entry.freezeId);
    return { forgotten: true };
  };
}

function workflowIdOrNone(): string | undefined {
  try {
    return activityInfo().workflowExecution?.workflowId;
  } catch {
    return undefined;
  }
}

function attempt(): number {
  try {
    return activityInfo().attempt;
  } catch {
    return 1;
  }
}
