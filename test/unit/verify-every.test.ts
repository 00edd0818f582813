import { describe, expect, it } from 'vitest';
import type { ImageSet } from '../../src/model/restore-point';
import { parseSnapshotInput } from '../../src/model/input';
import type { Verification } from '../../src/model/verification';
import { verificationDue } from '../../src/model/verify-every';

/* --verify-every N: a set is due when none of the N−1 sets before it (same schedule) has a verdict. */
const verdict = (v: Verification['verdict']): Verification => ({ verdict: v, at: '2026-12-04T00:00:00Z', workflowId: 'v' });
const set = (workflowId: string, o: Partial<ImageSet> = {}): ImageSet => ({
  workflowId, domain: 'vm-42', createdAt: '', quiesced: true, complete: true, restorable: true, schedule: 'nightly', disks: [], ...o,
});

describe('verificationDue', () => {
  it('every 2 over a run of sets: the 1st, 3rd and 5th are due when each due one was verified', () => {
    const sets: ImageSet[] = [];
    const due: boolean[] = [];
    for (let i = 1; i <= 5; i++) {
      sets.unshift(set(`run-${i}`));
      const d = verificationDue(sets, `run-${i}`, 2, 'nightly');
      if (d) sets[0].verification = verdict('verified');
      due.push(d);
    }
    expect(due).toEqual([true, false, true, false, true]);
  });

  it('a failed verdict counts as a verification (the rhythm holds; the set says it failed)', () => {
    expect(verificationDue([set('r2'), set('r1', { verification: verdict('failed') })], 'r2', 2, 'nightly')).toBe(false);
  });

  it('every 1: always; every 3 looks two sets back', () => {
    expect(verificationDue([set('r2'), set('r1', { verification: verdict('verified') })], 'r2', 1, 'nightly')).toBe(true);
    const sets = [set('r3'), set('r2'), set('r1', { verification: verdict('verified') })];
    expect(verificationDue(sets, 'r3', 3, 'nightly')).toBe(false);
    expect(verificationDue([set('r4'), ...sets], 'r4', 3, 'nightly')).toBe(true);
  });

  it("another schedule's or a manual set in between does not count, nor shift the rhythm", () => {
    const sets = [set('r2'), set('manual', { schedule: undefined }), set('other', { schedule: 'hourly' }), set('r1', { verification: verdict('verified') })];
    expect(verificationDue(sets, 'r2', 2, 'nightly')).toBe(false);
    // A run without a schedule counts every set of the VM before it.
    expect(verificationDue(sets, 'manual', 2)).toBe(true);
    expect(verificationDue(sets, 'manual', 3)).toBe(false);
  });

  it('a set that is not (or no longer) there, or not restorable, is never due', () => {
    expect(verificationDue([set('r1')], 'gone', 2, 'nightly')).toBe(false);
    expect(verificationDue([set('r1', { restorable: false })], 'r1', 2, 'nightly')).toBe(false);
  });
});

describe('verifyEvery in the snapshot input', () => {
  it('is refused with target.clone=false, and verifyCheck without it', () => {
    const noClone = parseSnapshotInput({ domain: 'vm-42', target: { clone: false }, verifyEvery: 2 });
    expect(noClone.ok || noClone.message).toMatch(/verifyEvery: .*snapshot-only/);
    const check = parseSnapshotInput({ domain: 'vm-42', verifyCheck: ['pg_isready'] });
    expect(check.ok || check.message).toMatch(/verifyCheck: .*verifyEvery/);
    expect(parseSnapshotInput({ domain: 'vm-42', verifyEvery: 0 }).ok).toBe(false);
    expect(parseSnapshotInput({ domain: 'vm-42', verifyEvery: 3, verifyCheck: ['pg_isready', '-q'] }).ok).toBe(true);
  });
});
