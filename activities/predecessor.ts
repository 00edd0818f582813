import type { ActivityDeps } from './deps';
import { thawGuest } from './thaw';

export interface PredecessorRequest {
  workflowId: string;
  runId: string;
  domainUuid: string;
  domainName: string;
  agentTimeoutSec: number;
}

/**
 * Before a run freezes: a freeze this host journaled for another run of the SAME workflow id is
 * orphaned — Temporal runs one execution per id at a time, so that run is closed (a Reset
 * terminated it inside its window, or it was terminated and this is a re-run) and will never run
 * its thaw. Thaw it now, so this run freezes afresh instead of failing on a guest that is
 * "already frozen", and the guest does not wait for the guard's deadline. A freeze owned by
 * anything else is left alone (the freeze step reports it).
 */
export function endPredecessorFreeze(deps: ActivityDeps) {
  const thaw = thawGuest(deps);
  return async function endPredecessorFreeze(req: PredecessorRequest): Promise<{ thawedFor?: string }> {
    let entry = await deps.guard.read(req.domainUuid);
    if (!entry || !isPredecessor(entry.owner, req.workflowId, req.runId)) return {};
    // The replaced run's workflow task may still be running its window in this worker (a
    // terminated run's local activities go on until its task completes): let it snapshot and
    // thaw, so its snapshot lands before prepare removes it, not after. Bounded by its deadline.
    const until = Math.min(entry.deadlineAt, Date.now() + 20_000);
    while (entry && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      entry = await deps.guard.read(req.domainUuid);
    }
    if (!entry) return { thawedFor: 'itself' };
    deps.log.warn('thawing a freeze left by an earlier run of this workflow id', { workflowId: req.workflowId, domain: req.domainName, owner: entry.owner });
    await thaw({ domainUuid: req.domainUuid, domainName: req.domainName, agentTimeoutSec: req.agentTimeoutSec, thawedBy: 'reconcile' });
    return { thawedFor: entry.owner };
  };
}

/** Owner strings are `<workflowId>/<runId>`; a workflow id may itself contain `/`. */
export function isPredecessor(owner: string, workflowId: string, runId: string): boolean {
  return owner.startsWith(`${workflowId}/`) && owner.slice(workflowId.length + 1) !== runId && !owner.slice(workflowId.length + 1).includes('/');
}
