import { condition, continueAsNew, defineQuery, defineSignal, setHandler, workflowInfo } from '@temporalio/workflow';
import { applyBeat, applyDrain, forgetStale } from '../src/model/fleet';
import type { FleetHost, HostBeat } from '../src/model/fleet';

export const hostBeatSignal = defineSignal<[HostBeat]>('hostBeat');
/** A worker shutting down cleanly: its host drains ("back soon"), it is not gone. */
export const hostLeftSignal = defineSignal<[{ host: string; identity: string }]>('hostLeft');
/** Every host the registry heard of in the last day, with its last beat and when it came. */
export const fleetQuery = defineQuery<FleetHost[]>('fleet');

/**
 * The fleet's registry: one long-running workflow per namespace (id FLEET_REGISTRY_ID) that every
 * worker signals-with-start with a heartbeat. It lives in Temporal because that is the one
 * service every host already reaches, and it survives any host dying; a host that stops beating
 * is lost after LOST_AFTER_INTERVALS of its own intervals (judged by the reader against real time).
 */
export async function fleetRegistry(state: { hosts?: Record<string, FleetHost> } = {}): Promise<void> {
  let hosts: Record<string, FleetHost> = state.hosts ?? {};
  setHandler(hostBeatSignal, (beat) => {
    hosts = applyBeat(hosts, beat, Date.now());
  });
  setHandler(hostLeftSignal, ({ host, identity }) => {
    hosts = applyDrain(hosts, host, identity, Date.now());
  });
  setHandler(fleetQuery, () => Object.values(hosts).sort((a, b) => a.host.localeCompare(b.host)));
  // A beat is one signal event: history grows without bound unless the registry starts over,
  // carrying the map, when Temporal suggests it (or at a fixed length on servers that do not).
  await condition(() => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > 4000);
  await continueAsNew<typeof fleetRegistry>({ hosts: forgetStale(hosts, Date.now()) });
}
