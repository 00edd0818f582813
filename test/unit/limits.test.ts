import { describe, expect, it } from 'vitest';
import { MAX_WAITERS, emptyLimit, grant, heldFromStart, nextLeaseEnd, nextTurn, pastLease, releaseTurn, renewLease, requestTurn } from '../../src/model/limits';
import type { LimitRequest } from '../../src/model/limits';

const req = (i: number, over: Partial<LimitRequest> = {}): LimitRequest => ({ workflowId: `run-${i}`, runId: `r${i}`, ticket: `r${i}/window`, leaseMs: 1000, n: 2, ...over });

/** Grants every turn that is free now (as the limit workflow does, before its signals go out). */
function grantAll(s: ReturnType<typeof emptyLimit>, now = 0): string[] {
  const out: string[] = [];
  for (let r = nextTurn(s); r; r = nextTurn(s)) {
    grant(s, r, now);
    out.push(r.workflowId);
  }
  return out;
}

describe('a fleet limit queue', () => {
  it('grants oldest first and never more than n at once', () => {
    const s = emptyLimit();
    for (let i = 1; i <= 5; i++) expect(requestTurn(s, req(i))).toBe('queued');
    expect(grantAll(s)).toEqual(['run-1', 'run-2']);
    expect(grantAll(s)).toEqual([]);
    releaseTurn(s, 'r2/window');
    expect(grantAll(s)).toEqual(['run-3']);
    releaseTurn(s, 'r1/window');
    releaseTurn(s, 'r3/window');
    expect(grantAll(s)).toEqual(['run-4', 'run-5']);
    expect(s.held.length).toBe(2);
  });

  it('a repeated request is the same request; a new run of a workflow id replaces the old run', () => {
    const s = emptyLimit();
    requestTurn(s, req(1));
    grantAll(s);
    expect(requestTurn(s, req(1))).toBe('held');
    requestTurn(s, req(2));
    expect(requestTurn(s, req(2))).toBe('queued');
    expect(s.queue.length).toBe(1);
    // run-1 was Reset: its new run asks; the old grant goes.
    expect(requestTurn(s, req(1, { runId: 'r1b', ticket: 'r1b/window' }))).toBe('queued');
    expect(s.held).toEqual([]);
    expect(grantAll(s)).toEqual(['run-2', 'run-1']);
    expect(s.held.map((h) => h.runId)).toEqual(['r2', 'r1b']);
  });

  it('the latest request sets the limit, and a full queue refuses', () => {
    const s = emptyLimit();
    requestTurn(s, req(1, { n: 1 }));
    requestTurn(s, req(2, { n: 1 }));
    expect(grantAll(s)).toEqual(['run-1']);
    requestTurn(s, req(3, { n: 3 }));
    expect(grantAll(s)).toEqual(['run-2', 'run-3']);
    expect(() => requestTurn(s, req(4, { n: 0 }))).toThrow(RangeError);
    const full = emptyLimit();
    for (let i = 0; i < MAX_WAITERS; i++) requestTurn(full, req(i, { n: 1 }));
    expect(requestTurn(full, req(MAX_WAITERS, { n: 1 }))).toBe('full');
  });

  it('a lease ends at its time and a renewal moves it', () => {
    const s = emptyLimit();
    requestTurn(s, req(1));
    requestTurn(s, req(2, { leaseMs: 5000 }));
    grantAll(s, 100);
    expect(nextLeaseEnd(s)).toBe(1100);
    expect(pastLease(s, 1100).map((h) => h.workflowId)).toEqual(['run-1']);
    renewLease(s, 'r1/window', 1100);
    expect(pastLease(s, 1100)).toEqual([]);
    expect(nextLeaseEnd(s)).toBe(2100);
  });
});

describe('a limit without a queue (the domain lock: n = 1)', () => {
  const lock = (i: number, over: Partial<LimitRequest> = {}): LimitRequest => ({ ...req(i, { n: 1, ticket: `r${i}/lock` }), queue: false, ...over });

  it('its start is its first grant; while held, another workflow id is refused at once, never queued', () => {
    const s = heldFromStart(lock(1), 100);
    expect(s.held.map((h) => h.workflowId)).toEqual(['run-1']);
    expect(nextLeaseEnd(s)).toBe(1100);
    expect(requestTurn(s, lock(2))).toBe('taken');
    expect(s.queue).toEqual([]);
    expect(requestTurn(s, lock(1))).toBe('held');
  });

  it('once the holder let go (released, or found closed) the next request is granted', () => {
    const s = heldFromStart(lock(1), 0);
    releaseTurn(s, 'r1/lock');
    expect(requestTurn(s, lock(2))).toBe('queued');
    expect(grantAll(s)).toEqual(['run-2']);
    // A second asker in the same moment finds the grant promised to the first: refused.
    const t = heldFromStart(lock(1), 0);
    releaseTurn(t, 'r1/lock');
    expect(requestTurn(t, lock(2))).toBe('queued');
    expect(requestTurn(t, lock(3))).toBe('taken');
    expect(grantAll(t)).toEqual(['run-2']);
  });

  it('a run a Reset made (same workflow id and ticket, another run id) takes its replaced run’s grant back', () => {
    const s = heldFromStart(lock(1), 0);
    expect(requestTurn(s, lock(1, { runId: 'r1-reset' }))).toBe('queued');
    expect(s.held).toEqual([]);
    expect(grantAll(s)).toEqual(['run-1']);
    expect(s.held.map((h) => [h.runId, h.ticket])).toEqual([['r1-reset', 'r1/lock']]);
    expect(requestTurn(s, lock(2))).toBe('taken');
  });

  it('a request that queues still queues behind the held grant', () => {
    const s = heldFromStart(lock(1), 0);
    expect(requestTurn(s, lock(2, { queue: true }))).toBe('queued');
  });
});
