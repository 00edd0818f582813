import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readRestoreKey } from '../../src/host/restore-key';
import type { RestorePoint } from '../../src/model/restore-point';
import { definitionRefusal } from '../../src/restore/definition-allow-list';
import { rewriteForNewDomain } from '../../src/restore/domain-xml-rewrite';
import { restorePointMac, verifyRestorePointMac } from '../../src/restore/record-mac';

// The lab guests' own shape: direct kernel boot from under /root/.cache, an RBD disk, a serial log, the agent socket.
const SOURCE = `<domain type='qemu'>
  <name>vmsnap-g1</name>
  <uuid>2805dc2a-bc66-4e43-8756-b06141381dab</uuid>
  <os>
    <type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type>
    <kernel>/root/.cache/vmsnap/guest-4b5b/vmlinux</kernel>
    <initrd>/root/.cache/vmsnap/guest-4b5b/initramfs.cpio</initrd>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='network' device='disk'><source protocol='rbd' name='vms/vmsnap-g1-vdb'/><target dev='vdb' bus='virtio'/></disk>
    <serial type='file'><source path='/lab/guests/console.log'/><target port='0'/></serial>
    <channel type='unix'><source mode='bind' path='/lab/guests/g1.agent'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
  </devices>
</domain>`;

const ctx = { clones: new Set(['vms/new-vdb']), imagePool: 'images', name: 'new' };
const rewritten = (xml: string) => rewriteForNewDomain(xml, { name: 'new', uuid: '00000000-0000-4000-8000-000000000001', disks: new Map([['vms/vmsnap-g1-vdb', 'vms/new-vdb']]) });
const withDevice = (device: string) => SOURCE.replace('  </devices>', `    ${device}\n  </devices>`);
const refusalOf = (source: string) => definitionRefusal(rewritten(source), source, ctx);

describe('the --as allow-list', () => {
  it("accepts the lab guest's own definition: kernel and initrd under /root/.cache, its chardev paths renamed", () => {
    expect(refusalOf(SOURCE)).toBeNull();
  });

  it.each([
    ["<hostdev mode='subsystem' type='pci'><source><address bus='0x00' slot='0x1f'/></source></hostdev>", /host device/],
    ["<filesystem type='mount'><source dir='/'/><target dir='root'/></filesystem>", /host directory/],
    ["<disk type='block' device='disk'><source dev='/dev/sda'/><target dev='vdz'/></disk>", /type='block'/],
    ["<disk type='file' device='disk'><source file='/etc/shadow'/><target dev='vdz'/></disk>", /writable host file/],
    ["<disk type='network' device='disk'><source protocol='rbd' name='vms/someone-else'/><target dev='vdz'/></disk>", /neither this restore's clone/],
    ["<disk type='network' device='disk'><source protocol='nbd' name='x'/><target dev='vdz'/></disk>", /non-RBD network disk/],
    ["<disk type='network' device='lun'><source protocol='rbd' name='vms/new-vdb'/><target dev='sdz'/></disk>", /LUN/],
    ["<serial type='dev'><source path='/dev/ttyS0'/><target port='1'/></serial>", /host character device/],
    ["<interface type='hostdev'><source><address type='pci' bus='0x01'/></source></interface>", /host network device/],
    ["<redirdev bus='usb' type='spicevmc'/>", /USB redirection/],
  ])('refuses %s even when the source had it', (device, why) => {
    expect(refusalOf(withDevice(device))).toMatch(why);
  });

  it('refuses QEMU pass-through and a disk in the images pool', () => {
    const qemu = SOURCE.replace('</domain>', "<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><qemu:arg value='-x'/></qemu:commandline></domain>");
    expect(refusalOf(qemu)).toMatch(/QEMU pass-through/);
    expect(definitionRefusal(rewritten(SOURCE), SOURCE, { ...ctx, clones: new Set(['images/new-vdb']), imagePool: 'vms' })).toMatch(/images pool/);
  });

  it("accepts a read-only file disk the source had; refuses a host path the source's definition does not name", () => {
    const iso = withDevice("<disk type='file' device='cdrom'><source file='/isos/tools.iso'/><target dev='hdc'/><readonly/></disk>");
    expect(refusalOf(iso)).toBeNull();
    expect(definitionRefusal(rewritten(SOURCE).replace('/root/.cache/vmsnap/guest-4b5b/vmlinux', '/tmp/evil'), SOURCE, ctx)).toMatch(/host path \/tmp\/evil is not the source VM's own/);
  });
});

describe('the restore record MAC', () => {
  const key = Buffer.from('k'.repeat(64));
  const p: RestorePoint = {
    v: 1, workflowId: 'snap-1', runId: 'r', domain: { name: 'vm', uuid: 'u' }, quiesced: true, recordedAt: '2026-01-01T00:00:00Z',
    disks: [{ target: 'vdb', image: 'images/vm-vdb-snap-1', source: 'vms/vm-vdb' }], domainXml: SOURCE,
  };
  const signed = { ...p, mac: restorePointMac(p, key) };

  it('verifies with the key that signed it, and only then', () => {
    expect(verifyRestorePointMac(signed, key)).toEqual({ ok: true });
    expect(verifyRestorePointMac(p, key)).toMatchObject({ ok: false, why: expect.stringMatching(/no MAC/) });
    expect(verifyRestorePointMac(signed, Buffer.from('x'.repeat(64)))).toMatchObject({ ok: false, why: expect.stringMatching(/another restore key/) });
  });

  it.each([
    ['the definition', { domainXml: withDevice('<hostdev/>') }],
    ['the disk list', { disks: [{ target: 'vdb', image: 'images/other', source: 'vms/vm-vdb' }] }],
    ['the domain', { domain: { name: 'vm', uuid: 'other' } }],
  ])('fails when %s was altered', (_what, change) => {
    expect(verifyRestorePointMac({ ...signed, ...change }, key)).toMatchObject({ ok: false, why: expect.stringMatching(/does not match/) });
  });
});

describe('the restore key file', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-key-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is used only when it exists, is mode 0600 and holds at least 32 bytes', async () => {
    const file = path.join(dir, 'restore.key');
    expect(await readRestoreKey(file)).toMatchObject({ ok: false, why: expect.stringMatching(/no restore key at/) });
    writeFileSync(file, 'a'.repeat(64) + '\n', { mode: 0o644 });
    chmodSync(file, 0o644);
    expect(await readRestoreKey(file)).toMatchObject({ ok: false, why: expect.stringMatching(/mode 644: it must be 0600/) });
    chmodSync(file, 0o600);
    expect(await readRestoreKey(file)).toMatchObject({ ok: true, key: Buffer.from('a'.repeat(64)) });
    writeFileSync(file, 'short');
    expect(await readRestoreKey(file)).toMatchObject({ ok: false, why: expect.stringMatching(/at least 32/) });
  });
});
