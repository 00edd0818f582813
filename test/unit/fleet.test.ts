import { describe, expect, it } from 'vitest';
import { applyBeat, applyDrain, applyRetire, forgetStale, hostState, isAlive, isWorthAsking, judgeAnswers, placeDomain, ASK_LOST_FOR_MS, FORGET_AFTER_MS } from '../../src/model/fleet';
import type { HostBeat, Presence } from '../../src/model/fleet';

const q = (h: string) => `vmsnap-${h}`;
const on = (host: string, state: string): Presence => ({ host, taskQueue: q(host), found: true, uuid: 'u', name: 'vm', state });
const none = (host: string): Presence => ({ host, taskQueue: q(host), found: false });

describe('placeDomain: where a VM runs, from every live host’s answer', () => {
  it('the one host that says running', () => {
    expect(placeDomain('vm', [none('a'), on('b', 'running')])).toMatchObject({ ok: true, host: 'b', taskQueue: 'vmsnap-b' });
  });
  it('mid-migration: running on the source, paused (incoming) on the destination → the source', () => {
    expect(placeDomain('vm', [on('a', 'running'), on('b', 'paused')])).toMatchObject({ ok: true, host: 'a' });
  });
  it('after a migration the source keeps a shut-off definition: the destination', () => {
    expect(placeDomain('vm', [on('a', 'shutoff'), on('b', 'running')])).toMatchObject({ ok: true, host: 'b' });
  });
  it('running on two hosts is not guessed between', () => {
    expect(placeDomain('vm', [on('a', 'running'), on('b', 'running')])).toMatchObject({ ok: false, why: 'ambiguous' });
  });
  it('shut off everywhere, unknown everywhere, no hosts', () => {
    expect(placeDomain('vm', [on('a', 'shutoff'), none('b')])).toMatchObject({ ok: false, why: 'not-running', definedOn: ['a'] });
    expect(placeDomain('vm', [none('a'), none('b')])).toMatchObject({ ok: false, why: 'not-found' });
    expect(placeDomain('vm', [])).toMatchObject({ ok: false, why: 'no-hosts' });
  });
  it('a live host that did not answer may be the one: never "not found"', () => {
    expect(placeDomain('vm', [none('a')], ['b'])).toMatchObject({ ok: false, why: 'unanswered' });
    expect(placeDomain('vm', [], ['b'])).toMatchObject({ ok: false, why: 'unanswered' });
    // …but an answer of "running" elsewhere is enough.
    expect(placeDomain('vm', [on('a', 'running')], ['b'])).toMatchObject({ ok: true, host: 'a' });
  });
});

describe('judgeAnswers: whose silence leaves "not found" unsure', () => {
  const host = (name: string, o: { ask?: boolean; alive?: boolean; lost?: boolean } = {}) => ({ host: name, ask: true, alive: true, lost: false, ...o });
  // Seen in the chaos lane: hv-a's worker silent 25 s (late, not lost), g1 running there; hv-b
  // said "not here", and the run failed DomainNotFound at once instead of looking again.
  it('a late host (not alive, not lost) that does not answer: unsure, so placement is not "not found"', () => {
    const j = judgeAnswers([host('a', { alive: false }), host('b')], [undefined, none('b')]);
    expect(j).toEqual({ answers: [none('b')], unanswered: ['a'] });
    expect(placeDomain('vm', j.answers, j.unanswered)).toMatchObject({ ok: false, why: 'unanswered' });
  });
  it('a host not asked (draining, or late past asking) but not lost: unsure too', () => {
    expect(judgeAnswers([host('a', { ask: false, alive: false }), host('b')], [none('b')]).unanswered).toEqual(['a']);
  });
  it('a lost host is ruled out, asked or not; one that answers counts', () => {
    expect(judgeAnswers([host('a', { alive: false, lost: true }), host('c', { ask: false, alive: false, lost: true }), host('b')], [undefined, none('b')])).toEqual({ answers: [none('b')], unanswered: [] });
    expect(judgeAnswers([host('a', { alive: false, lost: true }), host('b')], [on('a', 'running'), none('b')]).answers).toEqual([on('a', 'running'), none('b')]);
  });
  it('the rule of older histories: only an alive host’s silence counted', () => {
    expect(judgeAnswers([host('a', { alive: false }), host('c', { ask: false, alive: false }), host('b')], [undefined, none('b')], true).unanswered).toEqual([]);
  });
});

describe('registry bookkeeping', () => {
  const beat = (over: Partial<HostBeat> = {}): HostBeat => ({ host: 'a', taskQueue: q('a'), identity: 'vmsnap@a/1', sentAt: 1000, intervalMs: 10_000, domains: [], ...over });
  it('counts beats per worker identity; a restart starts over; an older beat is ignored', () => {
    let hosts = applyBeat({}, beat(), 1000);
    hosts = applyBeat(hosts, beat({ sentAt: 2000 }), 2000);
    expect(hosts.a.beats).toBe(2);
    expect(applyBeat(hosts, beat({ sentAt: 500 }), 3000)).toBe(hosts);
    expect(applyBeat(hosts, beat({ identity: 'vmsnap@a/2', sentAt: 100 }), 3000).a.beats).toBe(1);
  });
  it('a host lost for less than ASK_LOST_FOR_MS is still asked where a VM runs (its beat may just be late)', () => {
    expect(isWorthAsking({ seenAt: 0, intervalMs: 1000 }, 10_000)).toBe(true);
    expect(isAlive({ seenAt: 0, intervalMs: 1000 }, 10_000)).toBe(false);
    expect(isWorthAsking({ seenAt: 0, intervalMs: 1000 }, ASK_LOST_FOR_MS + 1)).toBe(false);
  });
  it('retired for good by its own last worker at any time, by an operator only once it no longer beats', () => {
    const hosts = applyBeat({}, beat(), 0);
    expect(applyRetire(hosts, 'a', { identity: 'vmsnap@a/1' })).toEqual({});
    expect(applyRetire(hosts, 'a', { identity: 'vmsnap@a/2' })).toBe(hosts);
    expect(applyRetire(hosts, 'a', { now: 30_000 })).toBe(hosts);
    expect(applyRetire(hosts, 'a', { now: 30_001 })).toEqual({});
    expect(applyRetire(applyDrain(hosts, 'a', 'vmsnap@a/1', 1), 'a', { now: 2 })).toEqual({});
    expect(applyRetire(hosts, 'b', { now: 0 })).toBe(hosts);
  });
  it('one state word per host: alive, late, draining (3x the threshold), lost', () => {
    const h = { seenAt: 0, intervalMs: 1000, lostAfterMs: 60_000 };
    expect(hostState(h, 3000)).toBe('alive');
    expect(hostState(h, 3001)).toBe('late');
    expect(hostState(h, 60_001)).toBe('lost');
    expect(hostState({ ...h, drainingSince: 0 }, 1)).toBe('draining');
    expect(hostState({ ...h, drainingSince: 0 }, 180_000)).toBe('draining');
    expect(hostState({ ...h, drainingSince: 0 }, 180_001)).toBe('lost');
  });
  it('alive within 3 of its own intervals; forgotten after a day', () => {
    expect(isAlive({ seenAt: 0, intervalMs: 10_000 }, 30_000)).toBe(true);
    expect(isAlive({ seenAt: 0, intervalMs: 10_000 }, 30_001)).toBe(false);
    const hosts = applyBeat({}, beat(), 0);
    expect(Object.keys(forgetStale(hosts, FORGET_AFTER_MS))).toEqual(['a']);
    expect(forgetStale(hosts, FORGET_AFTER_MS + 1)).toEqual({});
  });
});
