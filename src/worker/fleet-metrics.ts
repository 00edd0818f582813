import type { Client } from '@temporalio/client';
import type { Metrics, ScrapeSource } from '../host/metrics';
import { isAlive } from '../model/fleet';
import type { FleetHost } from '../model/fleet';
import { readHost } from './fleet-index';
import type { Logger } from './logger';

/** The fleet on /metrics: the hosts given (this worker's own), alive or lost, and which VMs each runs. */
export function publishFleet(metrics: Metrics, hosts: FleetHost[], now: number): void {
  metrics.replace(metrics.fleetHostAlive, hosts.map((h) => ({ labels: { host: h.host }, value: isAlive(h, now) ? 1 : 0 })));
  metrics.replace(metrics.fleetHostLastSeen, hosts.map((h) => ({ labels: { host: h.host }, value: h.seenAt / 1000 })));
  metrics.replace(metrics.fleetVm, hosts.flatMap((h) => h.domains.map((d) => ({ labels: { domain: d.name, host: h.host }, value: 1 }))));
}

/**
 * This host's fleet gauges, read from its index entry at each scrape (one query, cancelled when the
 * scrape stops waiting). Each worker exports its own host: the whole fleet's series from every
 * worker cost every scrape O(hosts) and Prometheus O(hosts²) series; `count by (state)` over the
 * fleet's scrapes gives the fleet's picture. No visibility call: Temporal rate-limits those per
 * namespace, and placements need them.
 */
export function indexFleet(client: Client, host: string): (signal: AbortSignal) => Promise<{ hosts: FleetHost[] }> {
  return (signal) =>
    client.withAbortSignal(signal, async () => {
      const h = await readHost(client, host);
      return { hosts: h ? [h] : [] };
    });
}

/**
 * The fleet gauges as a scrape source. When the index does not answer, the fleet series are
 * dropped, not kept at their last values, and `vmsnap_fleet_registry_up` says 0. A worker cut off
 * from Temporal is the one whose view is worthless right then: its old `host_alive 1` would hide a host the other workers already see lost, and a
 * last-seen time frozen at its last value reads as a healthy host. A vanished series is what
 * Prometheus already treats as stale, and `registry_up 0` tells on-call why it vanished.
 */
export function fleetGauges(read: (signal: AbortSignal) => Promise<{ hosts: FleetHost[] }>, log: Logger, now: () => number = Date.now): ScrapeSource<{ hosts: FleetHost[] }> {
  let down = false;
  return {
    read,
    publish(metrics, { hosts }) {
      publishFleet(metrics, hosts, now());
      metrics.fleetRegistryUp.set(1);
      if (down) log.info('fleet index readable again for /metrics');
      down = false;
    },
    unavailable(metrics, err) {
      publishFleet(metrics, [], now());
      metrics.fleetRegistryUp.set(0);
      // Once per outage, not once per scrape.
      if (!down) log.warn('cannot read the fleet index for /metrics; fleet series dropped until it answers', { error: String(err) });
      down = true;
    },
  };
}
