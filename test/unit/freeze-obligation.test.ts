import { describe, expect, it } from 'vitest';
import { decodeObligation, dueAt, encodeObligation, judgeArrival, judgeLateFreeze } from '../../src/model/freeze-obligation';
import type { FreezeObligation } from '../../src/model/freeze-obligation';
import { applyBeat, applyDrain, hostWatchMs, isAlive, isLost } from '../../src/model/fleet';
import type { FleetHost } from '../../src/model/fleet';

const o: FreezeObligation = {
  freezeId: 'f1',
  domainUuid: '6f1b1c2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f',
  domainName: 'vm',
  owner: 'wf/run',
  host: 'hv-a',
  frozenAt: 1000,
  deadlineAt: 9000,
  agentTimeoutSec: 3,
  disks: [{ pool: 'vms', image: 'vm-vda' }],
};

describe('a freeze obligation record', () => {
  it('round-trips, and a malformed one is never honoured', () => {
    expect(decodeObligation(encodeObligation(o))).toEqual(o);
    expect(decodeObligation('{')).toBeUndefined();
    expect(decodeObligation(JSON.stringify({ ...o, domainUuid: 'not-a-uuid' }))).toBeUndefined();
    expect(decodeObligation(JSON.stringify({ ...o, freezeId: '' }))).toBeUndefined();
    expect(decodeObligation(JSON.stringify({ ...o, deadlineAt: 'soon' }))).toBeUndefined();
  });

  // docs/group-freeze.md: a group-aware coordinator adds a `group` field to each member's key and
  // one group key beside them; hosts still on today's code must thaw the member at the group's
  // deadline and never act on the group key.
  it("a group member's record is honoured by today's decoder at its deadline, and the group's own key is never honoured", () => {
    const member = { ...o, owner: 'group-wf/run', group: { id: 'g1', members: 3 } };
    const read = decodeObligation(JSON.stringify(member));
    expect(read).toEqual({ ...o, owner: 'group-wf/run' });
    expect(judgeArrival(read!, 10_000, 1000)).toEqual({ act: 'thaw' });
    expect(judgeLateFreeze(read, 'f0', 5000, 1000)).toBe('leave');
    const groupKey = { groupId: 'g1', state: 'aborted', deadlineAt: 9000, members: [{ domainUuid: o.domainUuid, host: 'hv-a', freezeId: 'f1' }] };
    expect(decodeObligation(JSON.stringify(groupKey))).toBeUndefined();
  });

  it('another host waits for the deadline plus the clock skew, then thaws, whoever froze it', () => {
    expect(dueAt(o, 1000)).toBe(10_000);
    expect(judgeArrival(o, 9999, 1000)).toEqual({ act: 'wait', untilMs: 10_000 });
    expect(judgeArrival(o, 10_000, 1000)).toEqual({ act: 'thaw' });
  });

  it("a late-freeze watch leaves another freeze's window until it is due, and thaws its own, an unrecorded one, or an overdue one", () => {
    expect(judgeLateFreeze(o, 'f0', 5000, 1000)).toBe('leave');
    expect(judgeLateFreeze(o, undefined, 5000, 1000)).toBe('leave');
    expect(judgeLateFreeze(o, 'f0', 10_000, 1000)).toBe('thaw');
    expect(judgeLateFreeze(o, 'f1', 5000, 1000)).toBe('thaw');
    expect(judgeLateFreeze(undefined, 'f0', 5000, 1000)).toBe('thaw');
  });

  it('a live window of the same freeze on this host is its own run’s; a stale one or another freeze is not', () => {
    expect(judgeArrival(o, 20_000, 1000, { freezeId: 'f1', live: true }).act).toBe('leave');
    expect(judgeArrival(o, 20_000, 1000, { freezeId: 'f1', live: false }).act).toBe('thaw');
    expect(judgeArrival(o, 20_000, 1000, { freezeId: 'f0', live: true }).act).toBe('thaw');
  });
});

const host = (over: Partial<FleetHost> = {}): FleetHost => ({
  host: 'hv-a',
  taskQueue: 'vmsnap-hv-a',
  identity: 'vmsnap@hv-a/1',
  sentAt: 0,
  intervalMs: 1000,
  domains: [],
  seenAt: 0,
  beats: 1,
  lostAfterMs: 60_000,
  ...over,
});

describe('host lifecycle without false deaths', () => {
  it('a host is lost only after its own long threshold of silence, not after 3 missed beats', () => {
    const h = host();
    expect(isAlive(h, 3001)).toBe(false);
    expect(isLost(h, 3001)).toBe(false);
    expect(isLost(h, 60_000)).toBe(false);
    expect(isLost(h, 60_001)).toBe(true);
    // A beat of a release that sent no threshold: the default, 10 minutes.
    expect(isLost({ seenAt: 0 }, 599_999)).toBe(false);
  });

  it('a clean stop drains: not asked, not lost for three thresholds, and its next beat serves again', () => {
    let hosts: Record<string, FleetHost> = { 'hv-a': host() };
    hosts = applyDrain(hosts, 'hv-a', 'vmsnap@hv-a/1', 10);
    expect(hosts['hv-a'].drainingSince).toBe(10);
    expect(isAlive(hosts['hv-a'], 11)).toBe(false);
    expect(isLost(hosts['hv-a'], 179_999)).toBe(false);
    expect(isLost(hosts['hv-a'], 180_001)).toBe(true);
    // Only the worker that beat last may drain its host.
    expect(applyDrain(hosts, 'hv-a', 'vmsnap@hv-a/2', 20)['hv-a'].drainingSince).toBe(10);
    hosts = applyBeat(hosts, { ...host(), identity: 'vmsnap@hv-a/2', sentAt: 30 }, 30);
    expect(hosts['hv-a'].drainingSince).toBeUndefined();
    expect(isAlive(hosts['hv-a'], 31)).toBe(true);
  });

  it('a router looks a quarter of the threshold apart, between 3 s and 60 s', () => {
    expect(hostWatchMs({ lostAfterMs: 60_000 })).toBe(15_000);
    expect(hostWatchMs({ lostAfterMs: 4000 })).toBe(3000);
    expect(hostWatchMs(undefined)).toBe(60_000);
  });
});
