import { describe, expect, it } from 'vitest';
import { laneKey } from '../../src/ceph/snapshotter-pool';
import { parseListOmapVals } from '../../src/ceph/omap-cli';
import { IDENTITY_META, identityMetadata, inScope, sameVm } from '../../src/model/identity';
import {
  decodeOwnerRecord, encodeOwnerRecord, mayDropAbsent, ownerKey, parseOwnerKey, reaperAction,
} from '../../src/model/owner-record';
import type { OwnerRecord } from '../../src/model/owner-record';

const scope = { namespace: 'default', cluster: 'temporal-ns:1111' };
const UUID = '6f1c0c7e-0000-4000-8000-000000000001';
const vmMeta = (extra: Record<string, string> = {}) => ({ 'vmsnap.domain': 'web-1', ...identityMetadata(UUID, scope), ...extra });

describe('identity: retention acts on this VM (UUID) in this namespace and fleet only', () => {
  it('matches the same VM by UUID and scope', () => {
    expect(sameVm(vmMeta(), { domain: 'web-1', domainUuid: UUID, scope })).toBe(true);
  });

  it('a recreated VM of the same name (other UUID) is not the same VM', () => {
    expect(sameVm(vmMeta(), { domain: 'web-1', domainUuid: '6f1c0c7e-0000-4000-8000-000000000002', scope })).toBe(false);
  });

  it('another namespace or fleet is not ours, same UUID or not', () => {
    expect(sameVm(vmMeta(), { domain: 'web-1', domainUuid: UUID, scope: { ...scope, namespace: 'other' } })).toBe(false);
    expect(sameVm(vmMeta(), { domain: 'web-1', domainUuid: UUID, scope: { ...scope, cluster: 'fleet-b' } })).toBe(false);
    expect(inScope(vmMeta(), scope)).toBe(true);
    expect(inScope({ 'vmsnap.domain': 'web-1' }, scope)).toBe(false);
  });

  it('an image without a recorded UUID (made before) is never taken for a UUID-bearing VM', () => {
    expect(sameVm({ 'vmsnap.domain': 'web-1' }, { domain: 'web-1', domainUuid: UUID, scope })).toBe(false);
  });

  it('a retried pre-UUID request (no UUID) matches only pre-UUID images, by name', () => {
    expect(sameVm({ 'vmsnap.domain': 'web-1' }, { domain: 'web-1' })).toBe(true);
    expect(sameVm(vmMeta(), { domain: 'web-1' })).toBe(false);
    expect(sameVm({ 'vmsnap.domain': 'web-2' }, { domain: 'web-1' })).toBe(false);
  });

  it('the name must match too (a UUID copied onto another domain name is not trusted)', () => {
    expect(sameVm(vmMeta({ 'vmsnap.domain': 'web-2' }), { domain: 'web-1', domainUuid: UUID, scope })).toBe(false);
  });

  it('records the three identity keys', () => {
    expect(Object.keys(identityMetadata(UUID, scope)).sort()).toEqual(Object.values(IDENTITY_META).sort());
  });
});

describe('owner records: lifecycle', () => {
  const NOW = Date.parse('2026-12-01T05:00:00Z');
  const rec = (o: Partial<OwnerRecord> = {}): OwnerRecord => ({
    workflowId: 'wf-1', ...scope, recordedAt: new Date(NOW - 60_000).toISOString(), state: 'pending', ...o,
  });
  const act = (r: OwnerRecord, o: { runOpen?: boolean; snapExists?: boolean; horizonMs?: number } = {}) =>
    reaperAction(r, { scope, now: NOW, runOpen: o.runOpen ?? false, snapExists: o.snapExists ?? false, horizonMs: o.horizonMs ?? 3600_000 });

  it('round-trips and rejects malformed values', () => {
    expect(decodeOwnerRecord(encodeOwnerRecord(rec()))).toEqual(rec());
    expect(decodeOwnerRecord('not json')).toBeNull();
    expect(decodeOwnerRecord('{"workflowId":"x"}')).toBeNull();
    expect(decodeOwnerRecord(JSON.stringify({ ...rec(), state: 'weird' }))).toBeNull();
  });

  it('keys name image and snapshot; an image name with @ is impossible, the snapshot ends the key', () => {
    expect(parseOwnerKey(ownerKey('vmsnap-g1-vdb', 'vmsnap-abc'))).toEqual({ image: 'vmsnap-g1-vdb', snap: 'vmsnap-abc' });
    expect(parseOwnerKey('noat')).toBeNull();
    expect(parseOwnerKey('img@')).toBeNull();
  });

  it('a closed run: present snapshot is removed; absent one keeps its record until the horizon', () => {
    expect(act(rec(), { snapExists: true })).toBe('remove-snapshot');
    expect(act(rec())).toBe('keep-watching');
    expect(act(rec({ recordedAt: new Date(NOW - 3600_001).toISOString() }))).toBe('drop-record');
  });

  it('a snapshot landing after the late watch still has its record, so it is reaped', () => {
    // The compensation's watch ended (absent, lateMayLand): the record stays...
    expect(mayDropAbsent(rec(), { lateMayLand: true, now: NOW, horizonMs: 3600_000 })).toBe(false);
    // ...and when the lock owner wakes and the snapshot lands, the reaper removes it.
    expect(act(rec(), { snapExists: true })).toBe('remove-snapshot');
  });

  it('proven never created (request answered or never sent): the record may go at once', () => {
    expect(mayDropAbsent(rec(), { lateMayLand: false, now: NOW, horizonMs: 3600_000 })).toBe(true);
  });

  it('a running run, a kept result, another namespace or fleet: left alone', () => {
    expect(act(rec(), { runOpen: true, snapExists: true })).toBe('leave');
    expect(act(rec({ state: 'kept' }), { snapExists: true })).toBe('leave');
    expect(act(rec({ namespace: 'other' }), { snapExists: true })).toBe('leave');
    expect(act(rec({ cluster: 'fleet-b' }), { snapExists: true })).toBe('leave');
  });

  it('an unreadable record time never drops a record', () => {
    expect(act(rec({ recordedAt: 'yesterday' }))).toBe('keep-watching');
  });
});

describe('rados listomapvals output (Ceph 16 ignores --format for it)', () => {
  it('parses keys and hexdumped values, including an empty one', () => {
    const out = [
      'a@b',
      'value (56 bytes) :',
      '00000000  7b 22 77 6f 72 6b 66 6c  6f 77 49 64 22 3a 22 78  |{"workflowId":"x|',
      '00000010  20 79 22 2c 22 6c 6f 6e  67 22 3a 22 30 31 32 33  | y","long":"0123|',
      '00000020  34 35 36 37 38 39 61 62  63 64 65 66 30 31 32 33  |456789abcdef0123|',
      '00000030  34 35 36 37 38 39 22 7d                           |456789"}|',
      '00000038',
      '',
      'c@d',
      'value (0 bytes) :',
      '',
      '',
    ].join('\n');
    const m = parseListOmapVals(out);
    expect([...m.keys()]).toEqual(['a@b', 'c@d']);
    expect(JSON.parse(m.get('a@b')!)).toEqual({ workflowId: 'x y', long: '0123456789abcdef0123456789' });
    expect(m.get('c@d')).toBe('');
    expect(parseListOmapVals('').size).toBe(0);
  });

  it('refuses output it does not understand rather than guess', () => {
    expect(() => parseListOmapVals('a@b\nsomething else\n')).toThrow(/unexpected line/);
  });
});

describe('snapshotter lanes', () => {
  const r = (image: string, snap = 's') => ({ pool: 'vms', image, snap });
  it('one lane per VM: the same disks in any order and with any snapshot name meet the same lane', () => {
    expect(laneKey([r('g3-vdb'), r('g3-vdc', 'x')])).toBe(laneKey([r('g3-vdc', 'y'), r('g3-vdb')]));
    expect(laneKey([r('g1-vdb')])).not.toBe(laneKey([r('g3-vdb')]));
  });
});
