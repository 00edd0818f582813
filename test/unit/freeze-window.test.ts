import { describe, expect, it } from 'vitest';
import { backToBack, roundMs, windowBreakdown } from '../../src/model/freeze-window';

describe('windowBreakdown', () => {
  it('splits a window into its calls and the time between them', () => {
    const b = windowBreakdown([
      ['freeze', { startedAt: 100, returnedAt: 105 }],
      ['snapshot', { startedAt: 107, returnedAt: 117 }],
      ['thaw', { startedAt: 120, returnedAt: 123 }],
    ]);
    expect(b).toEqual({
      windowMs: 23,
      calls: { freeze: 5, snapshot: 10, thaw: 3 },
      between: { 'freeze→snapshot': 2, 'snapshot→thaw': 3 },
      gaps: 5,
    });
  });

  it('an empty window is all zeros', () => {
    expect(windowBreakdown([])).toEqual({ windowMs: 0, calls: {}, between: {}, gaps: 0 });
  });
});

describe('backToBack', () => {
  it('each call starts when the previous returned, so the gaps are 0 and the calls sum to the window', () => {
    const b = windowBreakdown(backToBack(1000, [['freeze', 1004], ['snapshot', 1030], ['clone', 1100], ['thaw', 1103]]));
    expect(b.calls).toEqual({ freeze: 4, snapshot: 26, clone: 70, thaw: 3 });
    expect(b.windowMs).toBe(103);
    expect(b.gaps).toBe(0);
  });
});

it('roundMs keeps one decimal', () => {
  expect(roundMs(12.345)).toBe(12.3);
  expect(roundMs(12.35)).toBe(12.4);
});
