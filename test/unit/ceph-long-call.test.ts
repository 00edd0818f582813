import { describe, expect, it } from 'vitest';
import { RbdError, isCanceled } from '../../src/ceph/errors';
import { runLongCall } from '../../src/ceph/long-call';
import type { Cancellable, ProgressFn } from '../../src/ceph/native';

/** A fake native long call: reports progress every tick, honours cancel like librbd. */
function fakeFlatten(total: number, tickMs = 1) {
  let cancelled = false;
  let started = false;
  const start = (cb: ProgressFn | undefined): Cancellable => {
    started = true;
    const promise = (async () => {
      for (let done = 0; done < total; done++) {
        await new Promise((r) => setTimeout(r, tickMs));
        cb?.(done, total);
        if (cancelled) throw Object.assign(new Error('x'), { errno: 125, call: 'rbd_flatten_with_progress' });
      }
    })();
    return [promise, () => { cancelled = true; }];
  };
  return { start, wasStarted: () => started };
}

describe('runLongCall (flatten/remove plumbing)', () => {
  it('passes progress through and resolves', async () => {
    const f = fakeFlatten(5);
    const seen: number[] = [];
    await runLongCall('rbd_flatten_with_progress', f.start, { onProgress: (d) => seen.push(d) });
    expect(seen).toEqual([0, 1, 2, 3, 4]);
  });

  it('abort via signal rejects with RbdError ECANCELED carrying the reason', async () => {
    const f = fakeFlatten(1000);
    const ac = new AbortController();
    const p = runLongCall('rbd_flatten_with_progress', f.start, { signal: ac.signal });
    setTimeout(() => ac.abort('stop'), 5);
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RbdError);
    expect(isCanceled(err)).toBe(true);
    expect((err as Error).cause).toBe('stop');
  });

  it('an already aborted signal never starts the native call', async () => {
    const f = fakeFlatten(3);
    const err = await runLongCall('rbd_flatten_with_progress', f.start, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect(isCanceled(err)).toBe(true);
    expect(f.wasStarted()).toBe(false);
  });

  it('a throwing onProgress cancels and becomes the rejection', async () => {
    const f = fakeFlatten(1000);
    const boom = new Error('boom');
    const err = await runLongCall('rbd_flatten_with_progress', f.start, { onProgress: () => { throw boom; } }).catch((e: unknown) => e);
    expect(err).toBe(boom);
  });
});
