import { describe, expect, it } from 'vitest';
import { InflightCalls } from '../../src/cli/inflight-calls';

type Listener = { onReceiveStatus?: (s: unknown) => void; onReceiveMessage?: (m: unknown) => void };

/** A stand-in for the next interceptor: records the listener it was started with. */
function fakeNext() {
  const started: Listener[] = [];
  const next = () => ({ start: (_m: unknown, l: Listener) => started.push(l) });
  return { started, next };
}

describe('InflightCalls (the CLI drains calls before closing its Temporal connection)', () => {
  it('counts a call from start to its final status, and idle() waits for the last one', async () => {
    const calls = new InflightCalls();
    const { started, next } = fakeNext();
    const intercept = calls.interceptor as unknown as (o: object, n: typeof next) => { start(m: unknown, l: Listener): void };
    const got: unknown[] = [];
    intercept({}, next).start({}, { onReceiveStatus: (s) => got.push(s), onReceiveMessage: (m) => got.push(m) });
    intercept({}, next).start({}, {});
    expect(calls.inflight).toBe(2);
    expect(await calls.idle(0)).toBe(false); // gave up: still in flight

    let idle = false;
    const waiting = calls.idle(10_000).then((v) => (idle = v));
    started[0].onReceiveMessage?.('m');
    started[0].onReceiveStatus?.({ code: 0 });
    started[0].onReceiveStatus?.({ code: 0 }); // a second status never counts twice
    await Promise.resolve();
    expect(got).toEqual(['m', { code: 0 }, { code: 0 }]); // passed through, counted once
    expect(calls.inflight).toBe(1);
    expect(idle).toBe(false);
    started[1].onReceiveStatus?.({ code: 14 });
    expect(await waiting).toBe(true);
    expect(calls.inflight).toBe(0);
    expect(await calls.idle(0)).toBe(true);
  });
});
