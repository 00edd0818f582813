import { ApplicationFailure } from '@temporalio/common';
import { isNoDomain } from '../src/libvirt';
import { FailureType } from '../src/model/failures';
import { isAlive, isWorthAsking } from '../src/model/fleet';
import type { FleetHost, Presence } from '../src/model/fleet';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

/** This host's view of one domain (read-only libvirt): the router asks every live host. */
export function domainPresence(deps: ActivityDeps) {
  return async function domainPresence(req: { domain: string; taskQueue: string }): Promise<Presence> {
    const lv = await deps.libvirtReadOnly();
    const base = { host: deps.host, taskQueue: req.taskQueue };
    let dom;
    try {
      dom = await lv.lookupDomain(req.domain);
    } catch (err) {
      if (isNoDomain(err)) return { ...base, found: false };
      throw err;
    }
    const { state } = await during('read domain state', () => lv.getDomainState(dom));
    return { ...base, found: true, uuid: dom.uuid, name: dom.name, state };
  };
}

/** The registry's hosts, each judged alive (and worth asking) against this worker's clock. */
export function fleetHosts(deps: ActivityDeps) {
  return async function fleetHosts(): Promise<(FleetHost & { alive: boolean; ask: boolean })[]> {
    if (!deps.fleet) throw ApplicationFailure.nonRetryable('this worker has no fleet client', FailureType.Unavailable);
    const now = Date.now();
    return (await deps.fleet.hosts()).map((h) => ({ ...h, alive: isAlive(h, now), ask: isWorthAsking(h, now) }));
  };
}

/**
 * Ends a run whose host was lost: its workflow tasks can no longer be served, and a run left open
 * there would hold names and the domain lock. The host's own layers (watchdog, reconcile at its
 * next start) answer for a guest it froze.
 */
export function terminateLostRun(deps: ActivityDeps) {
  return async function terminateLostRun(req: { workflowId: string; reason: string }): Promise<void> {
    if (!deps.fleet) throw ApplicationFailure.nonRetryable('this worker has no fleet client', FailureType.Unavailable);
    await deps.fleet.terminate(req.workflowId, req.reason);
  };
}
