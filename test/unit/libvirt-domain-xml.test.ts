import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDomainXml } from '../../src/libvirt/domain-xml';

/** Inactive XML as libvirtd 9.0 returned it (extracted from domain-xml.frames). */
const recorded = readFileSync(path.join(__dirname, '../fixtures/libvirt/rec-rbd.xml'), 'utf8');

describe('parseDomainXml', () => {
  const info = parseDomainXml(recorded);

  it('reads name, uuid and the agent channel', () => {
    expect(info.name).toBe('rec-rbd');
    expect(info.uuid).toBe('11111111-2222-4333-8444-555555555555');
    expect(info.hasAgentChannel).toBe(true);
  });

  it('reads <memory> in KiB, whatever its unit (virScaleInteger: powers of 1024 and of 1000)', () => {
    const mem = (m: string) => parseDomainXml(`<domain><name>n</name><uuid>u</uuid>${m}<devices/></domain>`).memoryKiB;
    expect(mem("<memory unit='MiB'>64</memory>")).toBe(65536);
    expect(mem('<memory>1048576</memory>')).toBe(1048576);
    expect(mem("<memory unit='G'>2</memory>")).toBe(2 * 1024 * 1024);
    expect(mem("<memory unit='MB'>1</memory>")).toBe(977);
    expect(mem("<memory unit='bytes'>2048</memory>")).toBe(2);
    expect(mem("<memory unit='furlongs'>2</memory>")).toBeUndefined();
    expect(mem('')).toBeUndefined();
  });

  it("reads libvirt's agent channel state of a running domain", () => {
    const live = (state: string) =>
      `<domain><name>n</name><uuid>u</uuid><devices><channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0' ${state}/></channel></devices></domain>`;
    expect(parseDomainXml(live("state='connected'")).agentChannelState).toBe('connected');
    expect(parseDomainXml(live("state='disconnected'")).agentChannelState).toBe('disconnected');
    expect(parseDomainXml(live('')).agentChannelState).toBeUndefined();
    expect(info.agentChannelState).toBeUndefined();
  });

  it('reads an RBD disk with <host> and <config file>', () => {
    expect(info.disks[0]).toEqual({
      target: 'vda',
      bus: 'virtio',
      device: 'disk',
      type: 'network',
      readonly: false,
      rbd: { pool: 'vmsnap', image: 'g1-root', hosts: [{ name: '127.0.0.1', port: 40123 }], configFile: '/work/main/.lab/ceph/ceph.conf' },
    });
  });

  it('reads an RBD disk with a namespace, several monitors and cephx auth', () => {
    expect(info.disks[1].rbd).toEqual({
      pool: 'vmsnap',
      namespace: 'ns1',
      image: 'g1-data',
      hosts: [{ name: 'mon1.example', port: 3300 }, { name: 'mon2.example' }],
      authUsername: 'vmsnap',
      secretUuid: 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee',
    });
  });

  it('reads a file disk and an empty read-only cdrom', () => {
    expect(info.disks[2]).toEqual({ target: 'vdc', bus: 'virtio', device: 'disk', type: 'file', readonly: false, sourceFile: '/tmp/vmsnap-rec/disk.raw' });
    expect(info.disks[3]).toEqual({ target: 'hdc', bus: 'ide', device: 'cdrom', type: 'file', readonly: true });
    expect(info.disks).toHaveLength(4);
  });

  it('finds no agent channel when only other channels exist', () => {
    const xml = `<domain><name>n</name><uuid>U</uuid><devices>
      <channel type='spicevmc'><target type='virtio' name='com.redhat.spice.0'/></channel></devices></domain>`;
    expect(parseDomainXml(xml)).toEqual({ name: 'n', uuid: 'u', disks: [], hasAgentChannel: false });
  });

  it('tolerates declarations, comments, CDATA, entities, double quotes and <auth> inside <source>', () => {
    const xml = `<?xml version="1.0"?>
      <!-- libvirt writes single quotes; others do not -->
      <domain type="kvm"><name>a&amp;b</name><uuid>11111111-2222-4333-8444-555555555555</uuid>
      <description><![CDATA[<disk> in text is not a disk]]></description>
      <devices><disk type="network" device="disk"><source protocol="rbd" name="p/img">
        <host name="h" port="6789"/><snapshot name="s1"/>
        <auth username="u"><secret type="ceph" uuid="aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"/></auth>
      </source><target dev="sda" bus="scsi"/></disk>
      <disk type="block" device="lun"><source dev="/dev/sdb"/><target dev="sdb" bus="scsi"/></disk></devices></domain>`;
    const parsed = parseDomainXml(xml);
    expect(parsed.name).toBe('a&b');
    expect(parsed.disks[0].rbd).toEqual({ pool: 'p', image: 'img', snapshot: 's1', hosts: [{ name: 'h', port: 6789 }], authUsername: 'u', secretUuid: 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee' });
    expect(parsed.disks[1]).toEqual({ target: 'sdb', bus: 'scsi', device: 'lun', type: 'block', readonly: false, sourceDev: '/dev/sdb' });
  });

  it('rejects documents that are not a domain', () => {
    expect(() => parseDomainXml('<network/>')).toThrow(/expected <domain>/);
    expect(() => parseDomainXml('not xml')).toThrow(/no XML element/);
  });
});
