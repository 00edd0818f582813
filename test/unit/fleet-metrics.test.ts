import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/host/metrics';
import { publishFleet } from '../../src/worker/fleet-beat';
import type { FleetHost } from '../../src/model/fleet';

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

describe('/metrics shows the fleet', () => {
  it('every host alive or lost, last seen, and its VMs; a VM that moved is not left behind', () => {
    const m = new Metrics();
    publishFleet(m, [host('a', 100_000, ['vm-1']), host('b', 0, ['vm-2'])], 105_000);
    let text = m.render();
    expect(text).toContain('vmsnap_fleet_host_alive{host="a"} 1');
    expect(text).toContain('vmsnap_fleet_host_alive{host="b"} 0');
    expect(text).toContain('vmsnap_fleet_host_last_seen_seconds{host="b"} 105');
    expect(text).toContain('vmsnap_fleet_vm{domain="vm-1",host="a"} 1');
    publishFleet(m, [host('a', 110_000, []), host('b', 110_000, ['vm-1', 'vm-2'])], 110_000);
    text = m.render();
    expect(text).not.toContain('vmsnap_fleet_vm{domain="vm-1",host="a"}');
    expect(text).toContain('vmsnap_fleet_vm{domain="vm-1",host="b"} 1');
  });
});
