import { describe, expect, it } from 'vitest';
import type { FleetHost } from '../../src/model/fleet';
import { domainKeys, indexOf, lookupKeys, nameKey, nextStateChangeAt, placementQuery } from '../../src/model/fleet-index';

const host = (o: Partial<FleetHost> = {}): FleetHost => ({ host: 'h', taskQueue: 'vmsnap-h', identity: 'vmsnap@h/1', sentAt: 0, intervalMs: 10_000, domains: [], seenAt: 0, beats: 1, ...o });

describe('the fleet index keys', () => {
  it('a name a query could not hold as it is goes in hashed, the same on every call; safe names and UUIDs as they are', () => {
    expect(nameKey('vm-42')).toBe('n:vm-42');
    const odd = nameKey(`x' OR VmsnapHost = 'y`);
    expect(odd).toMatch(/^h:[0-9a-f]{16}$/);
    expect(nameKey(`x' OR VmsnapHost = 'y`)).toBe(odd);
    expect(nameKey('ünïcode')).not.toBe(nameKey('unicode'));
    expect(domainKeys({ name: 'vm-1', uuid: 'ABCDEF01-0000-4000-8000-000000000001' })).toEqual(['n:vm-1', 'u:abcdef01-0000-4000-8000-000000000001']);
    expect(lookupKeys('ABCDEF01-0000-4000-8000-000000000001')).toEqual(['u:abcdef01-0000-4000-8000-000000000001', 'n:ABCDEF01-0000-4000-8000-000000000001']);
  });

  it('no quote of a domain name ever reaches a visibility query', () => {
    for (const name of [`a'b`, `'; DROP`, 'a"b', 'with space', '\\', 'x'.repeat(300)]) {
      const q = placementQuery(name);
      expect(q.split("'").length % 2).toBe(1); // balanced quotes: the name is one literal or a hash
      expect(q).not.toContain(name);
    }
  });

  it('the index is every running and shut-off domain, sorted, once', () => {
    const d = { name: 'vm-1', uuid: '00000000-0000-4000-8000-000000000001' };
    expect(indexOf({ domains: [d, d], defined: [{ name: 'vm-off', uuid: '00000000-0000-4000-8000-000000000002' }] })).toEqual([
      'n:vm-1',
      'n:vm-off',
      'u:00000000-0000-4000-8000-000000000001',
      'u:00000000-0000-4000-8000-000000000002',
    ]);
  });

  it('an entry wakes when its state would change: late after 3 intervals, lost at the threshold (3× after a clean stop), ends a day later', () => {
    const day = 86_400_000;
    expect(nextStateChangeAt(host({ seenAt: 0 }), 0, day)).toBe(30_001);
    expect(nextStateChangeAt(host({ seenAt: 0, lostAfterMs: 60_000 }), 30_001, day)).toBe(60_001);
    expect(nextStateChangeAt(host({ seenAt: 0, lostAfterMs: 60_000, drainingSince: 1 }), 1, day)).toBe(180_001);
    expect(nextStateChangeAt(host({ seenAt: 0, lostAfterMs: 60_000 }), 60_001, day)).toBe(day);
    expect(nextStateChangeAt(host({ seenAt: 0, lostAfterMs: 60_000 }), day + 1, day)).toBeUndefined();
  });
});
