import { describe, expect, it } from 'vitest';
import { decodeDrPoint, drPointKey, encodeDrPoint, snapOfDrPointKey } from '../../src/model/dr-point';
import type { DrPoint } from '../../src/model/dr-point';
import { drDefinition, checkTrusted, DrRestoreRefusal } from '../../src/dr/plan';
import { restorePointMac } from '../../src/restore/record-mac';
import { pointRbdSourcesAt } from '../../src/restore/domain-xml-rewrite';

/* dr-restore's pure parts: the DR point record, the disks pointed at the DR cluster, the MAC check. */

const XML = `<domain type='qemu'>
  <name>vm-42</name>
  <uuid>11111111-2222-4333-8444-555555555555</uuid>
  <devices>
    <channel type='unix'><source mode='bind'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <disk type='network' device='disk'>
      <source protocol='rbd' name='vms/vm-42-vdb'>
        <host name='10.0.0.1' port='6789'/>
        <auth username='qemu'><secret type='ceph' uuid='aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa'/></auth>
      </source>
      <target dev='vdb' bus='virtio'/>
    </disk>
  </devices>
</domain>
`;
const KEY = Buffer.alloc(32, 7);

function point(snap = 'vmsnap-run-1'): DrPoint {
  const p: Omit<DrPoint, 'v' | 'mac'> = {
    workflowId: 'run-1', runId: 'r', domain: { name: 'vm-42', uuid: '11111111-2222-4333-8444-555555555555' }, quiesced: true,
    recordedAt: '2026-12-07T00:00:00.000Z', snap, disks: [{ target: 'vdb', image: `vms/vm-42-vdb@${snap}`, source: 'vms/vm-42-vdb' }], domainXml: XML,
  };
  return { v: 1, ...p, mac: restorePointMac({ v: 1, ...p }, KEY) };
}
const site = { conf: '/etc/ceph/dr.conf', authUser: 'qemu', secretUuid: 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb' };

describe('DR point record', () => {
  it('is found under its snapshot’s key, and only there', () => {
    const p = point();
    const value = encodeDrPoint(p);
    expect(snapOfDrPointKey(drPointKey(p.snap))).toBe(p.snap);
    expect(snapOfDrPointKey('vmsnap.restore-point')).toBeNull();
    expect(decodeDrPoint(value, p.snap)?.workflowId).toBe('run-1');
    expect(decodeDrPoint(value, 'another-snap')).toBeNull();
  });

  it('names its snapshot under the MAC: a record moved to another snapshot does not verify', () => {
    const p = point();
    expect(() => checkTrusted(p, { ok: true, file: 'k', key: KEY, id: 'x' })).not.toThrow();
    const moved = { ...p, snap: 'other', disks: p.disks.map((d) => ({ ...d, image: `${d.source}@other` })) };
    expect(decodeDrPoint(encodeDrPoint(moved), 'other')).not.toBeNull();
    expect(() => checkTrusted(moved, { ok: true, file: 'k', key: KEY, id: 'x' })).toThrow(DrRestoreRefusal);
    expect(() => checkTrusted(p, { ok: false, file: 'k', why: 'no restore key at k' })).toThrow(/no restore key/);
  });
});

describe('the recovered definition', () => {
  it('renames the VM and points its clone at the DR cluster: its conf and secret, no primary monitor', () => {
    const p = point();
    const xml = drDefinition({ domain: 'vm-42', from: 'latest', as: 'vm-42-dr', pool: 'vms', force: false, site }, p, 'cccccccc-cccc-4ccc-8ccc-cccccccccccc', new Map([['vms/vm-42-vdb', 'vms/vm-42-dr-vdb']]), 'images');
    expect(xml).toContain('<name>vm-42-dr</name>');
    expect(xml).toContain("<source protocol='rbd' name='vms/vm-42-dr-vdb'>");
    expect(xml).toContain("<config file='/etc/ceph/dr.conf'/>");
    expect(xml).toContain(`<secret type='ceph' uuid='${site.secretUuid}'/>`);
    expect(xml).not.toContain('10.0.0.1');
    expect(xml).not.toContain('aaaaaaaa-');
    expect(xml).toContain("<source mode='bind'/>"); // a self-closing <source> before the disk is left alone
  });

  it('leaves RBD disks that are not its clones as they were', () => {
    expect(pointRbdSourcesAt(XML, new Set(['vms/other']), site)).toBe(XML);
  });

  it('is allow-listed as restore --as’s is', () => {
    const p = point();
    const bad = { ...p, domainXml: XML.replace('</devices>', "<hostdev mode='subsystem' type='pci'/></devices>") };
    expect(() => drDefinition({ domain: 'vm-42', from: 'latest', as: 'vm-42-dr', pool: 'vms', force: false, site }, bad, 'cccccccc-cccc-4ccc-8ccc-cccccccccccc', new Map([['vms/vm-42-vdb', 'vms/vm-42-dr-vdb']]), 'images')).toThrow(/hostdev/);
  });
});
