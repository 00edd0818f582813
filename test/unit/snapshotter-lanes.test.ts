import { describe, expect, it } from 'vitest';
import { idleLanesOverCap } from '../../src/ceph/snapshotter-pool';

describe('snapshotter lanes past their cap', () => {
  const lanes = new Map([
    ['a', { busy: 0, lastUsed: 30 }],
    ['b', { busy: 1, lastUsed: 10 }],
    ['c', { busy: 0, lastUsed: 20 }],
  ]);

  it('under the cap nothing is closed', () => expect(idleLanesOverCap(lanes, 4)).toEqual([]));
  it('at the cap the least recently used idle lane goes, never a busy one', () => expect(idleLanesOverCap(lanes, 3)).toEqual(['c']));
  it('as many as it takes, idle ones only: the cap is soft when lanes are busy', () => {
    expect(idleLanesOverCap(lanes, 2)).toEqual(['c', 'a']);
    expect(idleLanesOverCap(lanes, 1)).toEqual(['c', 'a']);
  });
});
