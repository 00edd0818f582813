import type { ActivityDeps } from './deps';
import { inspectDomain } from './inspect';
import { checkTargets } from './targets';
import { freezeGuest } from './freeze';
import { snapshotDisks } from './snapshot';
import { forgetFreeze, thawArrivedGuest, thawGuest } from './thaw';
import { domainPresence, fleetHost, fleetHosts, placementCandidates, freezeObligationOf, freezeObligationOpen, obligationRunningNowhere, rbdDisksDefinedHere, terminateLostRun } from './fleet';
import { cloneDisk } from './clone';
import { flattenDisk } from './flatten';
import { finalizeDisk } from './finalize';
import { removeImages, removeSourceSnaps } from './cleanup';
import { applyRetention } from './retention';
import { prepareSnapshots } from './prepare';
import { recordRestorePoint } from './restore-point';
import { restoreActivities } from './restore';
import { endPredecessorFreeze } from './predecessor';
import { atFailureEdge } from './failures';

export type { ActivityDeps } from './deps';

/**
 * Activities bound to one host's adapters, each behind the failure edge (failures.ts): what they
 * throw reaches the workflow as a typed ApplicationFailure. The workflow types its proxies from this.
 */
export function createActivities(deps: ActivityDeps) {
  return atFailureEdge({
    inspectDomain: inspectDomain(deps),
    checkTargets: checkTargets(deps),
    prepareSnapshots: prepareSnapshots(deps),
    endPredecessorFreeze: endPredecessorFreeze(deps),
    freezeGuest: freezeGuest(deps),
    snapshotDisks: snapshotDisks(deps),
    thawGuest: thawGuest(deps),
    thawArrivedGuest: thawArrivedGuest(deps),
    forgetFreeze: forgetFreeze(deps),
    domainPresence: domainPresence(deps),
    rbdDisksDefinedHere: rbdDisksDefinedHere(deps),
    fleetHosts: fleetHosts(deps),
    fleetHost: fleetHost(deps),
    placementCandidates: placementCandidates(deps),
    terminateLostRun: terminateLostRun(deps),
    freezeObligationOpen: freezeObligationOpen(deps),
    freezeObligationOf: freezeObligationOf(deps),
    obligationRunningNowhere: obligationRunningNowhere(deps),
    cloneDisk: cloneDisk(deps),
    flattenDisk: flattenDisk(deps),
    finalizeDisk: finalizeDisk(deps),
    removeImages: removeImages(deps),
    removeSourceSnaps: removeSourceSnaps(deps),
    applyRetention: applyRetention(deps),
    recordRestorePoint: recordRestorePoint(deps),
    ...restoreActivities(deps),
  });
}

export type Activities = ReturnType<typeof createActivities>;
