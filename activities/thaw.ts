import { activityInfo } from '@temporalio/activity';
import { monoMs, nowMs } from '../src/host/clock';
import { M } from '../src/host/metrics';
import { restoreAgentTimeout } from '../src/host/agent-timeout-restore';
import { thawAndConfirm } from '../src/host/thaw-confirm';
import type { ThawOutcome } from '../src/host/thaw-confirm';
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
    if (req.lateFreezeWatchMs && r.outcome === 'thawed') {
      await deps.guard.watch(
        { domainUuid: req.domainUuid, domainName: req.domainName, owner: req.owner ?? workflowIdOrNone() ?? 'unknown', agentTimeoutSec: req.agentTimeoutSec },
        req.lateFreezeWatchMs,
      );
    } else {
      await deps.guard.clear(req.domainUuid);
    }
    if (journaled?.mode === 'window') deps.metrics.add(M.frozenGuests, -1);
    const thawedFilesystems = r.outcome === 'thawed' ? r.thawedFilesystems : 0;
    const layer = guardFiredAt ? 'guard' : req.thawedBy;
    deps.metrics.inc(M.thaws, { layer });
    deps.log.info('guest thawed', {
      workflowId: workflowIdOrNone(),
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
      ...(guardFiredAt ? { guardFiredAt } : {}),
      ...(r.outcome === 'gone' ? { domainGone: true } : {}),
    };
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
