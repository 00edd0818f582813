import { describe, expect, it } from 'vitest';
import { parseSnapshotInput } from '../../src/model/input';
import type { SnapshotInput } from '../../src/model/input';
import { planSnapshot } from '../../src/model/plan';
import { runKeyFor, defaultImageName, fnv1a64, scheduledAt } from '../../src/model/naming';
import { RBD_NAME } from '../../src/model/input';
import type { InspectResult } from '../../src/model/types';

const input = (raw: Record<string, unknown>): SnapshotInput => {
  const r = parseSnapshotInput({ domain: 'vm-42', ...raw });
  if (!r.ok) throw new Error(r.message);
  return r.input;
};

const found = (over: Partial<InspectResult> = {}): InspectResult => ({
  domain: { name: 'vm-42', uuid: '0b0f8a6e-1d2c-4b7a-9f00-123456789abc' },
  host: 'h1',
  fsid: 'f',
  disks: [
    { target: 'vdb', rbd: { pool: 'vms', image: 'vm-42-vdb' } },
    { target: 'vdc', rbd: { pool: 'vms', image: 'vm-42-vdc' } },
  ],
  agent: { configured: true, responding: true },
  ...over,
});

describe('planSnapshot', () => {
  it('names everything from the workflow id, deterministically', () => {
    const a = planSnapshot(input({}), found(), 'wf-1');
    const b = planSnapshot(input({}), found(), 'wf-1');
    expect(a).toEqual(b);
    expect(a.ok && a.plan.disks.map((d) => [d.sourceSnap, d.image?.image])).toEqual([
      ['vmsnap-wf-1', 'vm-42-vdb-wf-1'],
      ['vmsnap-wf-1', 'vm-42-vdc-wf-1'],
    ]);
  });

  it('hashed scheme (histories recorded before readable names): the hash of ids that are not name-safe', () => {
    expect(runKeyFor('snap vm/42@x', 'hashed')).toMatch(/^h[0-9a-f]{16}$/);
    expect(runKeyFor('sched-g1-2026-01-01T03:00:00Z', 'hashed')).toBe(`h${fnv1a64('sched-g1-2026-01-01T03:00:00Z')}`);
    expect(runKeyFor('snap vm/42@x', 'hashed')).toBe(runKeyFor('snap vm/42@x', 'hashed'));
    expect(fnv1a64('a')).not.toBe(fnv1a64('b'));
    expect(defaultImageName('d'.repeat(63), 'vdb', 'k'.repeat(40))).toMatch(/^vmsnap-vdb-[0-9a-f]{16}$/);
  });

  it('readable scheme: a scheduled run is named by its UTC time and a short hash of its id', () => {
    const id = 'sched-nightly-2026-01-01T03:00:00Z';
    const key = runKeyFor(id);
    expect(key).toBe(`20260101T030000Z-${fnv1a64(id).slice(0, 8)}`);
    expect(runKeyFor(id)).toBe(key);
    expect(defaultImageName('vmsnap-g1', 'vdb', key)).toBe(`vmsnap-g1-vdb-${key}`);
    // Another schedule firing at the same second: same time, another hash.
    expect(runKeyFor('sched-hourly-2026-01-01T03:00:00Z')).toMatch(/^20260101T030000Z-[0-9a-f]{8}$/);
    expect(runKeyFor('sched-hourly-2026-01-01T03:00:00Z')).not.toBe(key);
    // Offsets and fractions: normalized to UTC seconds.
    expect(scheduledAt('x-2026-01-01T03:00:00.250+02:00')).toBe('20260101T010000Z');
    expect(scheduledAt('x-2026-13-01T03:00:00Z')).toBeNull();
    expect(scheduledAt('wf-1')).toBeNull();
  });

  it('readable scheme: other unsafe ids keep their safe characters and a hash; safe ids are unchanged', () => {
    expect(runKeyFor('snap vm/42@x')).toBe(`snap-vm-42-x-h${fnv1a64('snap vm/42@x').slice(0, 12)}`);
    expect(runKeyFor('wf-1')).toBe('wf-1');
    expect(runKeyFor('wf-1', 'hashed')).toBe('wf-1');
    expect(runKeyFor('a'.repeat(60))).toBe(`${'a'.repeat(24)}-h${fnv1a64('a'.repeat(60)).slice(0, 12)}`);
    expect(runKeyFor('::::')).toBe(`h${fnv1a64('::::')}`);
    for (const id of ['sched-g1-2026-01-01T03:00:00Z', 'snap vm/42@x', '-._ //x', 'x'.repeat(200), '::::']) {
      expect(defaultImageName('vmsnap-g1', 'vdb', runKeyFor(id))).toMatch(RBD_NAME);
      expect(`vmsnap-${runKeyFor(id)}`).toMatch(RBD_NAME);
    }
  });

  it('planSnapshot names by the scheme it is given (the workflow passes the one its history used)', () => {
    const id = 'sched-g1-2026-01-01T03:00:00Z';
    const readable = planSnapshot(input({}), found(), id);
    const hashed = planSnapshot(input({}), found(), id, 'hashed');
    expect(readable.ok && readable.plan.disks[0]!.image!.image).toBe(`vm-42-vdb-20260101T030000Z-${fnv1a64(id).slice(0, 8)}`);
    expect(hashed.ok && hashed.plan.disks[0]!.image!.image).toBe(`vm-42-vdb-h${fnv1a64(id)}`);
    expect(hashed.ok && hashed.plan.disks[0]!.sourceSnap).toBe(`vmsnap-h${fnv1a64(id)}`);
  });

  it('require without an agent is a typed failure; prefer says why it will not freeze', () => {
    const noAgent = found({ agent: { configured: false, responding: false } });
    expect(planSnapshot(input({ quiesce: 'require' }), noAgent, 'w')).toMatchObject({ ok: false, type: 'QuiesceUnavailable' });
    expect(planSnapshot(input({}), noAgent, 'w')).toMatchObject({ ok: true, plan: { freeze: false, noFreezeReason: 'domain has no guest agent channel' } });
    expect(planSnapshot(input({ quiesce: 'skip' }), found(), 'w')).toMatchObject({ ok: true, plan: { freeze: false } });
  });

  it('a non-RBD disk in an explicit list is an error; in the default set only with skipNonRbdDisks', () => {
    const mixed = found({ disks: [{ target: 'vda', unsupported: 'file disk' }, { target: 'vdb', rbd: { pool: 'vms', image: 'x' } }] });
    expect(planSnapshot(input({ disks: ['vda'] }), mixed, 'w')).toMatchObject({ ok: false, type: 'UnsupportedDisk' });
    expect(planSnapshot(input({}), mixed, 'w')).toMatchObject({ ok: false, type: 'UnsupportedDisk' });
    const ok = planSnapshot(input({ skipNonRbdDisks: true }), mixed, 'w');
    expect(ok).toMatchObject({ ok: true, plan: { skipped: [{ target: 'vda', reason: 'file disk' }] } });
  });

  it('refuses a target that is its own source or shared by two disks', () => {
    expect(planSnapshot(input({ target: { pool: 'vms', images: { vdb: 'vm-42-vdb' } } }), found(), 'w')).toMatchObject({ ok: false });
    expect(planSnapshot(input({ target: { images: { vdb: 'same', vdc: 'same' } } }), found(), 'w')).toMatchObject({ ok: false });
  });
});
