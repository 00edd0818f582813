import type { Client } from '@temporalio/client';
import { M } from '../host/metrics';
import type { Metrics, ScrapeSource } from '../host/metrics';
import { isAlive, secondsSinceSeen } from '../model/fleet';
import type { FleetHost } from '../model/fleet';
import { readFleet } from './fleet-beat';
import type { Logger } from './logger';

/** The fleet on /metrics: every host the registry knows, alive or lost, and which VMs it runs. */
export function publishFleet(metrics: Metrics, hosts: FleetHost[], now: number): void {
  metrics.replace(M.fleetHostAlive, hosts.map((h) => ({ labels: { host: h.host }, value: isAlive(h, now) ? 1 : 0 })));
  metrics.replace(M.fleetHostLastSeen, hosts.map((h) => ({ labels: { host: h.host }, value: secondsSinceSeen(h, now) })));
  metrics.replace(M.fleetVm, hosts.flatMap((h) => h.domains.map((d) => ({ labels: { host: h.host, domain: d.name }, value: 1 }))));
}

/** The fleet gauges, read from the registry at each scrape (the query is cancelled when the scrape stops waiting). */
export function registryFleet(client: Client): (signal: AbortSignal) => Promise<FleetHost[]> {
  return (signal) => client.withAbortSignal(signal, () => readFleet(client));
}

/**
 * The fleet gauges as a scrape source. When the registry does not answer, the fleet series are
 * dropped, not kept at their last values, and `vmsnap_fleet_registry_up` says 0. Every worker
 * exports the whole fleet, so a worker cut off from Temporal is the one whose view is worthless
 * right then: its old `host_alive 1` would hide a host the other workers already see lost, and a
 * `last_seen_seconds` frozen in time reads as a healthy host. A vanished series is what
 * Prometheus already treats as stale, and `registry_up 0` tells on-call why it vanished.
 */
export function fleetGauges(read: (signal: AbortSignal) => Promise<FleetHost[]>, log: Logger, now: () => number = Date.now): ScrapeSource<FleetHost[]> {
  let down = false;
  return {
    read,
    publish(metrics, hosts) {
      publishFleet(metrics, hosts, now());
      metrics.set(M.fleetRegistryUp, 1);
      if (down) log.info('fleet registry readable again for /metrics');
      down = false;
    },
    unavailable(metrics, err) {
      publishFleet(metrics, [], now());
      metrics.set(M.fleetRegistryUp, 0);
      // Once per outage, not once per scrape.
      if (!down) log.warn('cannot read the fleet registry for /metrics; fleet series dropped until it answers', { error: String(err) });
      down = true;
    },
  };
}
