import { describe, expect, it } from 'vitest';
import { parseSnapshotInput } from '../../src/model/input';
import type { SnapshotInput } from '../../src/model/input';
import { planSnapshot } from '../../src/model/plan';
import { runKeyFor, defaultImageName, fnv1a64 } from '../../src/model/naming';
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

  it('hashes workflow ids that are not name-safe', () => {
    expect(runKeyFor('snap vm/42@x')).toMatch(/^h[0-9a-f]{16}$/);
    expect(runKeyFor('snap vm/42@x')).toBe(runKeyFor('snap vm/42@x'));
    expect(fnv1a64('a')).not.toBe(fnv1a64('b'));
    expect(defaultImageName('d'.repeat(63), 'vdb', 'k'.repeat(40))).toMatch(/^vmsnap-vdb-[0-9a-f]{16}$/);
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
