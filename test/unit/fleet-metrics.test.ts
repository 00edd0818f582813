import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/host/metrics';
import { fleetGauges, publishFleet } from '../../src/worker/fleet-metrics';
import { metricsEndpoint } from '../../src/worker/metrics-endpoint';
import type { FleetHost } from '../../src/model/fleet';
import type { Logger } from '../../src/worker/logger';

const host = (name: string, seenAt: number, domains: string[]): FleetHost => ({
  host: name,
  taskQueue: `vmsnap-${name}`,
  identity: `vmsnap@${name}/1`,
  sentAt: seenAt,
  intervalMs: 10_000,
  domains: domains.map((d) => ({ name: d, uuid: d })),
  seenAt,
  beats: 1,
});

const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };

describe('/metrics shows the fleet', () => {
  it('every host alive or lost, last seen, and its VMs; a VM that moved is not left behind', async () => {
    const m = new Metrics();
    publishFleet(m, [host('a', 100_000, ['vm-1']), host('b', 0, ['vm-2'])], 105_000);
    let text = await m.render();
    expect(text).toContain('vmsnap_fleet_host_alive{host="a"} 1');
    expect(text).toContain('vmsnap_fleet_host_alive{host="b"} 0');
    expect(text).toContain('vmsnap_fleet_host_last_seen_timestamp_seconds{host="a"} 100\n');
    expect(text).toContain('vmsnap_fleet_host_last_seen_timestamp_seconds{host="b"} 0\n');
    expect(text).toContain('vmsnap_fleet_vm{domain="vm-1",host="a"} 1');
    publishFleet(m, [host('a', 110_000, []), host('b', 110_000, ['vm-1', 'vm-2'])], 110_000);
    text = await m.render();
    expect(text).not.toContain('vmsnap_fleet_vm{domain="vm-1",host="a"}');
    expect(text).toContain('vmsnap_fleet_vm{domain="vm-1",host="b"} 1');
  });
});

describe('the fleet gauges are read when /metrics is scraped', () => {
  const servers: http.Server[] = [];
  afterEach(() => {
    for (const s of servers.splice(0)) s.close();
  });

  /** The worker's endpoint with only the fleet source behind it; no beat runs. */
  async function endpoint(read: (signal: AbortSignal) => Promise<FleetHost[]>, now: () => number, timeoutMs = 2_000) {
    const metrics = new Metrics();
    metrics.onScrape(fleetGauges(async (signal) => ({ hosts: await read(signal) }), quiet, now));
    const serve = metricsEndpoint(() => [], metrics, 0, timeoutMs);
    const server = http.createServer((req, res) => void serve(req, res));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
    return () => fetch(url).then((r) => r.text());
  }

  it('each scrape asks the registry and shows what it says then', async () => {
    let fleet = [host('a', 100_000, ['vm-1'])];
    let reads = 0;
    const scrape = await endpoint(async () => (reads++, fleet), () => 105_000);

    let text = await scrape();
    expect(reads).toBe(1);
    expect(text).toContain('vmsnap_fleet_host_alive{host="a"} 1');
    expect(text).toContain('vmsnap_fleet_vm{domain="vm-1",host="a"} 1');
    expect(text).toContain('vmsnap_fleet_registry_up 1');

    fleet = [host('a', 0, []), host('b', 104_000, ['vm-1'])];
    text = await scrape();
    expect(reads).toBe(2);
    expect(text).toContain('vmsnap_fleet_host_alive{host="a"} 0');
    expect(text).toContain('vmsnap_fleet_vm{domain="vm-1",host="b"} 1');
    expect(text).not.toContain('vmsnap_fleet_vm{domain="vm-1",host="a"}');
  });

  it('a registry that does not answer costs the scrape its fleet series, within the timeout, and says so', async () => {
    let hang = false;
    let aborted = false;
    const read = (signal: AbortSignal) =>
      hang
        ? new Promise<FleetHost[]>(() => signal.addEventListener('abort', () => (aborted = true)))
        : Promise.resolve([host('a', 100_000, ['vm-1'])]);
    const scrape = await endpoint(read, () => 105_000, 200);
    expect(await scrape()).toContain('vmsnap_fleet_host_alive{host="a"} 1');

    hang = true;
    const t0 = Date.now();
    const text = await scrape();
    expect(Date.now() - t0).toBeLessThan(1_500);
    expect(aborted).toBe(true);
    expect(text).toContain('vmsnap_fleet_registry_up 0');
    expect(text).not.toContain('vmsnap_fleet_host_alive{');
    expect(text).not.toContain('vmsnap_fleet_vm{');
    // The worker's own series are still there.
    expect(text).toMatch(/# TYPE vmsnap_fleet_host_alive gauge/);

    hang = false;
    expect(await scrape()).toContain('vmsnap_fleet_registry_up 1');
  });

  it('a registry read that fails outright is the same as one that does not answer', async () => {
    const scrape = await endpoint(() => Promise.reject(new Error('workflow not found')), () => 105_000);
    const text = await scrape();
    expect(text).toContain('vmsnap_fleet_registry_up 0');
    expect(text).not.toContain('vmsnap_fleet_host_alive{');
  });
});
