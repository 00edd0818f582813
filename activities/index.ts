import type { ActivityDeps } from './deps';
import { inspectDomain } from './inspect';
import { checkTargets } from './targets';
import { freezeGuest } from './freeze';
import { snapshotDisks } from './snapshot';
import { mirrorToDrSite } from './mirror';
import { forgetFreeze, thawArrivedGuest, thawGuest } from './thaw';
import { domainPresence, fleetHost, fleetHosts, placementCandidates, freezeObligationOf, freezeObligationOpen, obligationRunningNowhere, rbdDisksDefinedHere, terminateLostRun } from './fleet';
import { cloneDisk } from './clone';
import { flattenDisk } from './flatten';
import { finalizeDisk } from './finalize';
import { removeImages, removeSourceSnaps } from './cleanup';
import { applyRetention } from './retention';
import { prepareSnapshots } from './prepare';
import { recordRestorePoint } from './restore-point';
import { restoreActivityFactories } from './restore';
import { endPredecessorFreeze } from './predecessor';
import { atFailureEdge } from './failures';
import { boundToRun } from '../src/worker/run-log';

export type { ActivityDeps } from './deps';

/**
 * Activities bound to one host's adapters, each behind the failure edge (failures.ts): what they
 * throw reaches the workflow as a typed ApplicationFailure. The workflow types its proxies from this.
 */
export function createActivities(deps: ActivityDeps) {
  return atFailureEdge(
    perExecution(deps, {
      inspectDomain,
      checkTargets,
      prepareSnapshots,
      endPredecessorFreeze,
      freezeGuest,
      snapshotDisks,
      mirrorToDrSite,
      thawGuest,
      thawArrivedGuest,
      forgetFreeze,
      domainPresence,
      rbdDisksDefinedHere,
      fleetHosts,
      fleetHost,
      placementCandidates,
      terminateLostRun,
      freezeObligationOpen,
      freezeObligationOf,
      obligationRunningNowhere,
      cloneDisk,
      flattenDisk,
      finalizeDisk,
      removeImages,
      removeSourceSnaps,
      applyRetention,
      recordRestorePoint,
      ...restoreActivityFactories,
    }),
  );
}

type Factory = (deps: ActivityDeps) => (...args: never[]) => Promise<unknown>;

/**
 * Each activity built anew for each execution, with `deps.log` bound to that execution's run
 * (src/worker/run-log.ts): every line it writes, and every line of what it hands that logger to,
 * names the workflow id, run id and domain. The factories keep no state, so this costs a closure.
 */
function perExecution<F extends Record<string, Factory>>(deps: ActivityDeps, factories: F): { [K in keyof F]: ReturnType<F[K]> } {
  const out: Record<string, (...args: never[]) => Promise<unknown>> = {};
  for (const [name, factory] of Object.entries(factories)) {
    out[name] = (...args: never[]) => factory({ ...deps, log: boundToRun(deps.log, args[0]) })(...args);
  }
  return out as { [K in keyof F]: ReturnType<F[K]> };
}

export type Activities = ReturnType<typeof createActivities>;
