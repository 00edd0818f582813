import { ApplicationFailure } from '@temporalio/common';
import { isNoDomain } from '../src/libvirt';
import type { LibvirtClient } from '../src/libvirt';
import { FailureType } from '../src/model/failures';
import { isAlive, isLost, isWorthAsking } from '../src/model/fleet';
import type { FleetHost, Presence } from '../src/model/fleet';
import { imageWatchers } from '../src/ceph';
import { definedRbdDisks } from '../src/host/defined-disks';
import type { FreezeObligation } from '../src/model/freeze-obligation';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

/** This host's view of one domain (read-only libvirt): the router asks every live host. */
export function domainPresence(deps: ActivityDeps) {
  return async function domainPresence(req: { domain: string; taskQueue: string; withRoom?: boolean }): Promise<Presence> {
    const lv = await deps.libvirtReadOnly();
    const base = { host: deps.host, taskQueue: req.taskQueue, ...(req.withRoom ? { roomKiB: await roomKiB(lv, deps.memoryReserveMiB ?? 0) } : {}) };
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

/**
 * What a new VM may take here: libvirt's free + buffers + cached (the kernel gives page cache
 * back) minus the host's reserve, never below 0.
 */
async function roomKiB(lv: LibvirtClient, reserveMiB: number): Promise<number> {
  const m = await during('read host memory', () => lv.nodeMemoryStats());
  return Math.max(0, (m.free ?? 0) + (m.buffers ?? 0) + (m.cached ?? 0) - reserveMiB * 1024);
}

/**
 * Which of these RBD disks (`pool/image`, `pool/namespace/image`) a domain defined on this host
 * uses, running or not (read-only libvirt): another host's reaper asks before it removes a disk.
 */
export function rbdDisksDefinedHere(deps: ActivityDeps) {
  return async function rbdDisksDefinedHere(req: { disks: string[] }): Promise<{ disk: string; domain: string }[]> {
    const defined = await definedRbdDisks(await deps.libvirtReadOnly());
    return req.disks.flatMap((disk) => (defined.get(disk) ?? []).map((u) => ({ disk, domain: u.name })));
  };
}

export type Judged = FleetHost & { alive: boolean; ask: boolean; lost: boolean };

/** A host judged alive (and worth asking) against this worker's clock. */
function judged(h: FleetHost, now: number): Judged {
  return { ...h, alive: isAlive(h, now), ask: isAlive(h, now) || (h.drainingSince === undefined && isWorthAsking(h, now)), lost: isLost(h, now) };
}

function fleetOf(deps: ActivityDeps): NonNullable<ActivityDeps['fleet']> {
  if (!deps.fleet) throw ApplicationFailure.nonRetryable('this worker has no fleet client', FailureType.Unavailable);
  return deps.fleet;
}

/** Every host of the fleet, judged (restore's room, the reaper's disk question, histories before the index). */
export function fleetHosts(deps: ActivityDeps) {
  return async function fleetHosts(): Promise<Judged[]> {
    const now = Date.now();
    return (await fleetOf(deps).hosts()).map((h) => judged(h, now));
  };
}

/** One host, judged, or null when the index has no entry for it (a router's host watch). */
export function fleetHost(deps: ActivityDeps) {
  return async function fleetHost(req: { host: string }): Promise<Judged | null> {
    const h = await fleetOf(deps).host(req.host);
    return h ? judged(h, Date.now()) : null;
  };
}

/**
 * The hosts a placement asks, judged: the ones the index names for the domain and a bounded few
 * whose index may be stale. Its size does not grow with the fleet.
 */
export function placementCandidates(deps: ActivityDeps) {
  return async function placementCandidates(req: { domain: string }): Promise<{ hosts: Judged[]; silent: string[]; live?: number }> {
    const c = await fleetOf(deps).candidates(req.domain);
    const now = Date.now();
    return { ...c, hosts: c.hosts.map((h) => judged(h, now)) };
  };
}

/**
 * Ends a run whose host was lost: its workflow tasks can no longer be served, and a run left open
 * there would hold names and the domain lock. The host's own layers (watchdog, reconcile at its
 * next start) answer for a guest it froze.
 */
export function terminateLostRun(deps: ActivityDeps) {
  return async function terminateLostRun(req: { workflowId: string; reason: string }): Promise<void> {
    await fleetOf(deps).terminate(req.workflowId, req.reason);
  };
}

/** The hand-off's first question each look: is this freeze still owed a thaw? */
export function freezeObligationOpen(deps: ActivityDeps) {
  return async function freezeObligationOpen(req: { domainUuid: string; freezeId: string }): Promise<boolean> {
    return (await deps.guard.obligationOf(req.domainUuid))?.freezeId === req.freezeId;
  };
}

/**
 * "Found on no live host" is a reason to keep looking (a host may be down, restarting, not yet
 * rolled out); "no QEMU anywhere has one of its disks open" is proof that nothing runs the guest,
 * so nothing is frozen: the obligation is resolved. Without recorded disks there is no proof.
 */
export function obligationRunningNowhere(deps: ActivityDeps) {
  return async function obligationRunningNowhere(req: { domainUuid: string; freezeId?: string; disks: FreezeObligation['disks'] }): Promise<boolean> {
    if (!req.disks.length) return false;
    for (const d of req.disks) if ((await imageWatchers(deps.radosCli, d)).length) return false;
    await deps.guard.resolve(req.domainUuid, req.freezeId);
    deps.log.warn('freeze obligation resolved: the guest runs nowhere (no host runs it, none of its disks is open)', { domainUuid: req.domainUuid, freezeId: req.freezeId });
    return true;
  };
}

/** The open obligation of a domain, if any: what a lost host's router hands over before it ends the run. */
export function freezeObligationOf(deps: ActivityDeps) {
  return async function freezeObligationOf(req: { domainUuid: string }): Promise<FreezeObligation | null> {
    return (await deps.guard.obligationOf(req.domainUuid)) ?? null;
  };
}
