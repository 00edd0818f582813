import { ApplicationFailure } from '@temporalio/common';
import { activityInfo } from '@temporalio/activity';
import type { DomainRef, LibvirtClient } from '../src/libvirt';
import { nowMs } from '../src/host/clock';
import { M } from '../src/host/metrics';
import { FailureType } from '../src/model/failures';
import type { ThawRequest, ThawResult } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { toFailure } from './failures';

/**
 * virDomainFSThaw, then proof: guest-fsfreeze-status must say `thawed` before the host guard is
 * released and the journal entry cleared. Idempotent — thawing a thawed guest returns 0.
 */
export function thawGuest(deps: ActivityDeps) {
  return async function thawGuest(req: ThawRequest): Promise<ThawResult> {
    const lv = await deps.libvirt();
    let dom: DomainRef;
    try {
      dom = await lv.lookupDomainByUuid(req.domainUuid);
    } catch (err) {
      throw toFailure(err, `thaw ${req.domainName}`);
    }
    const startedAt = nowMs();
    let thawedFilesystems = 0;
    let returnedAt: number;
    try {
      thawedFilesystems = await lv.fsThaw(dom, undefined, { timeoutMs: req.agentTimeoutSec * 1000 + 2000 });
      returnedAt = nowMs();
    } catch (err) {
      returnedAt = nowMs();
      // Ambiguous (agent timeout, connection drop): the state is unknown until the guest says so.
      await confirmThawed(lv, dom, req, err);
    }
    const { guardFiredAt } = await deps.guard.release(req.domainUuid);
    const journaled = await deps.guard.read(req.domainUuid);
    await deps.guard.clear(req.domainUuid);
    if (journaled) deps.metrics.add(M.frozenGuests, -1);
    const layer = guardFiredAt ? 'guard' : req.thawedBy;
    deps.metrics.inc(M.thaws, { layer });
    deps.log.info('guest thawed', { workflowId: workflowIdOrNone(), domain: req.domainName, layer, thawedFilesystems, guardFiredAt });
    return { thawedFilesystems, startedAt, returnedAt, ...(guardFiredAt ? { guardFiredAt } : {}) };
  };
}

async function confirmThawed(lv: LibvirtClient, dom: DomainRef, req: ThawRequest, first: unknown): Promise<void> {
  let status: string | undefined;
  try {
    status = await lv.fsFreezeStatus(dom, req.agentTimeoutSec);
    if (status === 'frozen') {
      await lv.fsThaw(dom, undefined, { timeoutMs: req.agentTimeoutSec * 1000 + 2000 });
      status = await lv.fsFreezeStatus(dom, req.agentTimeoutSec);
    }
  } catch {
    // fall through with status unknown
  }
  if (status !== 'thawed') {
    const f = toFailure(first, `thaw ${req.domainName} (attempt ${attempt()})`);
    // Retryable always: the retry policy (and, past it, escalation) is the workflow's decision.
    throw ApplicationFailure.create({ message: f.message, type: FailureType.ThawFailed, nonRetryable: false, details: f.details ?? undefined });
  }
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
