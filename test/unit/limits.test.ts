import { describe, expect, it } from 'vitest';
import { MAX_WAITERS, emptyLimit, grant, nextLeaseEnd, nextTurn, pastLease, releaseTurn, renewLease, requestTurn } from '../../src/model/limits';
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
