import { condition, continueAsNew, defineQuery, defineSignal, patched, setHandler, workflowInfo } from '@temporalio/workflow';
import { applyBeat, applyDrain, applyRetire, forgetStale } from '../src/model/fleet';
import type { FleetHost, HostBeat, HostLeave } from '../src/model/fleet';

export const hostBeatSignal = defineSignal<[HostBeat]>('hostBeat');
/** A worker shutting down cleanly: its host drains ("back soon"), or with `forGood` is retired. */
export const hostLeftSignal = defineSignal<[HostLeave]>('hostLeft');
/** An operator retiring a host whose worker is gone (`vmsnap fleet forget`); ignored while it beats. */
export const hostForgottenSignal = defineSignal<[{ host: string }]>('hostForgotten');
/** Every host the registry heard of in the last day, with its last beat and when it came. */
export const fleetQuery = defineQuery<FleetHost[]>('fleet');

/**
 * The fleet's registry of releases before the fleet index (workflows/fleet-host.ts): kept so that
 * a registry still running during a rolling upgrade is served and its history replays; no worker
 * of this release beats into it, and one terminates it once its hosts moved (src/worker/fleet-index.ts).
 * Retire 2027-06-01 with the FLEET_INDEX patch. It was one long-running workflow per namespace (id FLEET_REGISTRY_ID) that every
 * worker signals-with-start with a heartbeat. It lives in Temporal because that is the one
 * service every host already reaches, and it survives any host dying; a host that stops beating
 * is lost after LOST_AFTER_INTERVALS of its own intervals (judged by the reader against real time).
 */
export async function fleetRegistry(state: { hosts?: Record<string, FleetHost> } = {}): Promise<void> {
  let hosts: Record<string, FleetHost> = state.hosts ?? {};
  setHandler(hostBeatSignal, (beat) => {
    hosts = applyBeat(hosts, beat, Date.now());
  });
  setHandler(hostLeftSignal, ({ host, identity, forGood }) => {
    hosts = forGood ? applyRetire(hosts, host, { identity }) : applyDrain(hosts, host, identity, Date.now());
  });
  setHandler(hostForgottenSignal, ({ host }) => {
    hosts = applyRetire(hosts, host, { now: Date.now() });
  });
  setHandler(fleetQuery, () => Object.values(hosts).sort((a, b) => a.host.localeCompare(b.host)));
  // A beat is one signal event: history grows without bound unless the registry starts over,
  // carrying the map, when Temporal suggests it (or at a fixed length on servers that do not).
  // Every new worker replays the whole history on its first task: at 4000 events (~0.9 MB with
  // 1 s beats) that replay outlasted the 10 s workflow task timeout on a loaded 2-core lab host,
  // again and again, and every fleet query timed out. 1000 events is ~0.25 MB.
  const maxEvents = patched(SHORT_HISTORY) ? 1000 : 4000;
  await condition(() => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxEvents);
  await continueAsNew<typeof fleetRegistry>({ hosts: forgetStale(hosts, Date.now()) });
}

/** Registry runs from before the shorter history. A run ends at its cap, so retire after one release. */
const SHORT_HISTORY = 'vmsnap-registry-short-history';
