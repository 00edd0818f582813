import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model/failures';
import { parseRestoreInput } from '../../src/model/restore-input';
import { chooseImageSet, restoredDiskNameAs, restoredDiskNameInPlace, restoredDomainUuid } from '../../src/model/restore-plan';
import { decodeRestorePoint, encodeRestorePoint, imageSetsOf, RESTORE_POINT_KEY } from '../../src/model/restore-point';
import type { CatalogImage } from '../../src/model/restore-point';
import { META } from '../../src/model/types';
import { rbdSourceNames, rewriteForNewDomain, swapRbdSources } from '../../src/restore/domain-xml-rewrite';

function image(name: string, wf: string, at: string, o: { domain?: string; state?: string; target?: string; record?: boolean; pool?: string } = {}): CatalogImage {
  const pool = o.pool ?? 'images';
  const target = o.target ?? 'vdb';
  const meta: Record<string, string> = {
    [META.owner]: 'vmsnap',
    [META.image]: `${pool}/${name}`,
    [META.workflowId]: wf,
    [META.domain]: o.domain ?? 'vm1',
    [META.createdAt]: at,
    [META.state]: o.state ?? 'complete',
    [META.quiesced]: 'true',
    [`${META.labelPrefix}schedule`]: 'nightly',
  };
  if (o.record !== false) {
    meta[RESTORE_POINT_KEY] = encodeRestorePoint({
      workflowId: wf, runId: 'r1', domain: { name: o.domain ?? 'vm1', uuid: '6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162' },
      quiesced: true, recordedAt: at, disks: [{ target, image: `${pool}/${name}`, source: `vms/${o.domain ?? 'vm1'}-${target}` }], domainXml: '<domain/>',
    });
  }
  return { pool, name, sizeBytes: 64 << 20, meta };
}

describe('image sets (vmsnap list)', () => {
  it('groups a pool by run, newest first, only this VM’s and only vmsnap’s own images', () => {
    const clone = image('someone-else', 'w1', '2026-01-01T00:00:00Z');
    clone.meta[META.image] = 'images/vm1-vdb-w1'; // a clone of ours carries our keys, naming its parent
    const sets = imageSetsOf('vm1', [
      image('vm1-vdb-w1', 'w1', '2026-01-01T00:00:00Z'),
      image('vm1-vdb-w2', 'w2', '2026-01-02T00:00:00Z'),
      image('vm2-vdb-w3', 'w3', '2026-01-03T00:00:00Z', { domain: 'vm2' }),
      clone,
      { pool: 'images', name: 'foreign', sizeBytes: 1, meta: {} },
    ]);
    expect(sets.map((s) => s.workflowId)).toEqual(['w2', 'w1']);
    expect(sets[0]).toMatchObject({ quiesced: true, restorable: true, schedule: 'nightly', disks: [{ target: 'vdb', image: 'images/vm1-vdb-w2', sizeBytes: 64 << 20 }] });
    expect(imageSetsOf('6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162', [image('x', 'w1', 't')])).toHaveLength(1);
  });

  it('a set with an unfinished image, or without a restore record, is not restorable', () => {
    const [unfinished] = imageSetsOf('vm1', [image('a', 'w1', 't', { state: 'cloned' })]);
    expect(unfinished).toMatchObject({ complete: false, restorable: false });
    const [old] = imageSetsOf('vm1', [image('a', 'w1', 't', { record: false })]);
    expect(old).toMatchObject({ complete: true, restorable: false });
  });

  it('chooses latest restorable, or the named run, with typed errors', () => {
    const sets = imageSetsOf('vm1', [image('a', 'w1', '2026-01-01'), image('b', 'w2', '2026-01-02', { state: 'cloned' })]);
    expect(chooseImageSet('vm1', sets, 'latest')).toMatchObject({ ok: true, set: { workflowId: 'w1' } });
    expect(chooseImageSet('vm1', sets, 'w2')).toMatchObject({ ok: false, type: FailureType.RestorePointIncomplete });
    expect(chooseImageSet('vm1', sets, 'nope')).toMatchObject({ ok: false, type: FailureType.RestorePointNotFound });
    expect(chooseImageSet('vm1', [], 'latest')).toMatchObject({ ok: false, type: FailureType.RestorePointNotFound });
  });

  it('decodes only records it understands', () => {
    expect(decodeRestorePoint('{"v":2}')).toBeNull();
    expect(decodeRestorePoint('not json')).toBeNull();
    expect(decodeRestorePoint(null)).toBeNull();
  });
});

describe('restore names', () => {
  it('derive from the workflow id, deterministically', () => {
    expect(restoredDomainUuid('restore-a')).toBe(restoredDomainUuid('restore-a'));
    expect(restoredDomainUuid('restore-a')).not.toBe(restoredDomainUuid('restore-b'));
    expect(restoredDomainUuid('restore-a')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(restoredDiskNameAs('new-vm', 'vdb')).toBe('new-vm-vdb');
    expect(restoredDiskNameInPlace('vm1-vdb', 'restore-a')).toMatch(/^vm1-vdb-r[0-9a-f]{8}$/);
    expect(restoredDiskNameInPlace('vm1-vdb', 'restore-a')).not.toBe(restoredDiskNameInPlace('vm1-vdb', 'restore-b'));
  });
});

describe('restore input', () => {
  it('defaults and refusals', () => {
    expect(parseRestoreInput({ domain: 'vm1' })).toMatchObject({ ok: true, input: { from: 'latest', stop: false, flatten: false, imagePool: 'images' } });
    expect(parseRestoreInput({ domain: 'vm1', as: 'x', stop: true })).toMatchObject({ ok: false });
    expect(parseRestoreInput({ domain: 'vm 1' })).toMatchObject({ ok: false });
    expect(parseRestoreInput({ domain: 'vm1', as: 'a/b' })).toMatchObject({ ok: false });
    expect(parseRestoreInput({ domain: 'vm1', extra: 1 })).toMatchObject({ ok: false });
  });
});

const XML = `<domain type='qemu'>
  <name>vm1</name>
  <uuid>6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162</uuid>
  <devices>
    <disk type='network' device='disk'>
      <source protocol='rbd' name='vms/vm1-vdb'>
        <config file='/etc/ceph/ceph.conf'/>
      </source>
      <target dev='vdb' bus='virtio'/>
    </disk>
    <interface type='network'>
      <mac address='52:54:00:12:34:56'/>
      <source network='default'/>
    </interface>
    <channel type='unix'>
      <source mode='bind' path='/var/lab/vm1/ctl.sock'/>
      <target type='virtio' name='org.vmsnap.ctl.0'/>
    </channel>
    <serial type='file'>
      <source path='/var/lab/vm1/serial.log' append='off'/>
    </serial>
  </devices>
</domain>`;

describe('domain XML rewrites', () => {
  it('a new VM: name, UUID, no MAC, disks swapped, chardev paths moved; nothing else changes', () => {
    const out = rewriteForNewDomain(XML, { name: 'vm1-copy', uuid: '11111111-2222-4333-8444-555555555555', disks: new Map([['vms/vm1-vdb', 'vms/vm1-copy-vdb']]) });
    expect(out).toContain('<name>vm1-copy</name>');
    expect(out).toContain('<uuid>11111111-2222-4333-8444-555555555555</uuid>');
    expect(out).not.toContain('<mac');
    expect(rbdSourceNames(out)).toEqual(['vms/vm1-copy-vdb']);
    expect(out).toContain("path='/var/lab/vm1/vm1-copy.ctl.sock'");
    expect(out).toContain("path='/var/lab/vm1/vm1-copy.serial.log' append='off'");
    expect(out).toContain("<source network='default'/>");
    expect(out).toContain("<config file='/etc/ceph/ceph.conf'/>");
  });

  it('in place: only the RBD source names change, and swapping back gives the original bytes', () => {
    const there = swapRbdSources(XML, new Map([['vms/vm1-vdb', 'vms/vm1-vdb-r1234abcd']]));
    expect(rbdSourceNames(there)).toEqual(['vms/vm1-vdb-r1234abcd']);
    expect(swapRbdSources(there, new Map([['vms/vm1-vdb-r1234abcd', 'vms/vm1-vdb']]))).toBe(XML);
    expect(swapRbdSources(XML, new Map([['vms/other', 'x']]))).toBe(XML);
  });
});
