import { describe, expect, it, vi } from 'vitest';
import { Periodic } from '../../src/worker/periodic';

describe('a worker loop', () => {
  it('never runs a pass beside one still under way: the late one skips', async () => {
    let release: () => void = () => undefined;
    let passes = 0;
    const loop = new Periodic(60_000, () => new Promise<number>((r) => (passes++, (release = () => r(passes)))), () => undefined);
    const first = loop.run();
    expect(await loop.run()).toBeUndefined();
    release();
    expect(await first).toBe(1);
    expect(passes).toBe(1);
  });

  it('halt() stops the timer and returns only once the pass under way has ended', async () => {
    let release: () => void = () => undefined;
    let ended = false;
    const loop = new Periodic(60_000, () => new Promise<void>((r) => (release = () => ((ended = true), r()))), () => undefined);
    loop.start({ now: true });
    let halted = false;
    const halting = loop.halt().then(() => (halted = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(halted).toBe(false);
    release();
    await halting;
    expect(ended).toBe(true);
    // A halted loop with nothing under way returns at once.
    await loop.halt();
  });

  it('a pass the timer starts that fails goes to onError and the next interval runs again', async () => {
    vi.useFakeTimers();
    try {
      const errors: unknown[] = [];
      let passes = 0;
      const loop = new Periodic(
        1_000,
        async () => {
          passes++;
          throw new Error(`pass ${passes}`);
        },
        (err) => errors.push(err),
      );
      loop.start({ now: true });
      loop.start({ now: true }); // a second start adds no timer and no pass
      await vi.advanceTimersByTimeAsync(2_000);
      loop.stop();
      await vi.advanceTimersByTimeAsync(5_000);
      expect(passes).toBe(3);
      expect(errors.map(String)).toEqual(['Error: pass 1', 'Error: pass 2', 'Error: pass 3']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a pass asked for directly throws what it threw', async () => {
    const loop = new Periodic(60_000, () => Promise.reject(new Error('no ceph')), () => undefined);
    await expect(loop.run()).rejects.toThrow('no ceph');
  });
});
