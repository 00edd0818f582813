import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { ActivityDeps } from '../../activities/deps';
import { LibvirtError } from '../../src/libvirt';
import { FailureType } from '../../src/model/failures';
import { parseRestoreInput } from '../../src/model/restore-input';
import { encodeRestorePoint, RESTORE_POINT_KEY } from '../../src/model/restore-point';
import type { CatalogImage, RestorePlan } from '../../src/model/restore-point';
import { cephxSecretOf, loadRestoreRecordKey } from '../../src/host/restore-record-key';
import { NO_SOURCE_VM, refusedDefinition, sourceVmPathsOf } from '../../src/restore/definition-allow-list';
import { signRestoreRecord, verifyRestoreRecord } from '../../src/restore/record-mac';

/*
 * Issue 25 #9, the trust boundary of restore: a record is acted on only if a worker wrote it (an
 * HMAC with the fleet's restore-record key), and `restore --as` defines only a definition inside
 * the allow-list. The activities run here against a stand-in pool (the image metadata a planter
 * controls) and a stand-in libvirt that records whether anything was defined.
 */

// The images pool as a planter sees it: the catalog and each image's metadata.
const pool = { catalog: [] as CatalogImage[] };
vi.mock('../../src/restore/catalog', () => ({ readCatalog: async () => pool.catalog }));
vi.mock('../../src/ceph', async (importOriginal) => ({
  ...(await importOriginal<Record<string, unknown>>()),
  openImage: async (_io: unknown, name: string) => ({
    getMetadata: async (k: string) => pool.catalog.find((c) => c.name === name)?.meta[k] ?? null,
    snapExists: async () => true,
    close: async () => undefined,
  }),
  imageExists: async () => false,
}));
const { planRestore } = await import('../../activities/restore-plan');
const { defineRestoredDomain } = await import('../../activities/restore-domain');

const KEY = Buffer.from('k'.repeat(64));
const LAB = '/srv/lab/guests/g3';
const SOURCE_UUID = '5d0f8a43-8a3e-4c7b-9f6e-2b1d4c3a5e6f';
const CONF = '/srv/lab/ceph/ceph.conf';

/** A lab guest's definition, as lab/guests.sh writes it and libvirt gives it back. */
const goodXml = (devices = '') => `<domain type='qemu'>
  <name>g3</name>
  <uuid>${SOURCE_UUID}</uuid>
  <memory unit='KiB'>262144</memory>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>${LAB}/image/vmlinux</kernel>
    <initrd>${LAB}/image/initramfs.cpio</initrd>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='network' device='disk'>
      <driver name='qemu' type='raw' cache='writeback'/>
      <source protocol='rbd' name='vms/g3-vdb'><config file='${CONF}'/></source>
      <target dev='vdb' bus='virtio'/>
    </disk>
    <interface type='network'><mac address='52:54:00:12:34:56'/><source network='default'/></interface>
    <channel type='unix'><source mode='bind'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <channel type='unix'><source mode='bind' path='${LAB}/a/ctl.sock'/><target type='virtio' name='org.vmsnap.ctl.0'/></channel>
    <serial type='file'><source path='${LAB}/a/serial.log' append='off'/><target port='0'/></serial>${devices}
  </devices>
</domain>`;

const record = (xml: string) =>
  encodeRestorePoint({
    workflowId: 'wf-1', runId: 'run-1', domain: { name: 'g3', uuid: SOURCE_UUID }, quiesced: true, recordedAt: '2026-12-01T00:00:00.000Z',
    disks: [{ target: 'vdb', image: 'images/wf-1-vdb', source: 'vms/g3-vdb' }], domainXml: xml,
  });

function plantSet(recordValue: string): void {
  pool.catalog = [{
    pool: 'images', name: 'wf-1-vdb', sizeBytes: 4 << 20,
    meta: {
      'vmsnap.owner': 'vmsnap', 'vmsnap.image': 'images/wf-1-vdb', 'vmsnap.domain': 'g3', 'vmsnap.workflow-id': 'wf-1',
      'vmsnap.state': 'complete', 'vmsnap.created-at': '2026-12-01T00:00:00.000Z', [RESTORE_POINT_KEY]: recordValue,
    },
  }];
}

function host(sourceDefined = true) {
  const defined: string[] = [];
  const lv = {
    async lookupDomain(nameOrUuid: string) {
      if (nameOrUuid === SOURCE_UUID && sourceDefined) return { name: 'g3', uuid: SOURCE_UUID, id: 1 };
      throw new LibvirtError({ code: 42, domain: 10, level: 2, message: 'Domain not found', procedure: 'LOOKUP' });
    },
    async lookupDomainByUuid(uuid: string) {
      return this.lookupDomain(uuid);
    },
    async getDomainXml() {
      return goodXml();
    },
    async getDomainState() {
      return { state: 'running' };
    },
    async domainDefineXml(xml: string) {
      defined.push(xml);
    },
  };
  const deps = {
    host: 'h', libvirt: async () => lv, libvirtReadOnly: async () => lv, ioctx: async (p: string) => ({ pool: p }),
    radosCli: { conf: CONF }, restoreRecordKey: async () => KEY,
  } as unknown as ActivityDeps;
  return { deps, defined };
}

const asInput = () => {
  const r = parseRestoreInput({ domain: 'g3', from: 'wf-1', as: 'g3-copy', imagePool: 'images' });
  if (!r.ok) throw new Error(r.message);
  return r.input;
};
const failureOf = (p: Promise<unknown>) => p.then(() => { throw new Error('expected a failure'); }, (e: unknown) => e as ApplicationFailure);

beforeEach(() => {
  pool.catalog = [];
});

describe('the restore record is trusted only if a worker wrote it', () => {
  it('sign → verify; altered, unsigned or signed with another key: untrusted', () => {
    const signed = signRestoreRecord(record(goodXml()), KEY);
    expect(verifyRestoreRecord(signed, KEY)).toEqual({ trusted: true });
    expect(verifyRestoreRecord(record(goodXml()), KEY)).toMatchObject({ trusted: false, why: expect.stringContaining('no mac') });
    expect(verifyRestoreRecord(signed.replace('vms/g3-vdb', 'vms/g1-vdb'), KEY)).toMatchObject({ trusted: false, why: expect.stringContaining('does not match') });
    expect(verifyRestoreRecord(signed, Buffer.from('x'.repeat(64)))).toMatchObject({ trusted: false });
    expect(verifyRestoreRecord('not json', KEY)).toMatchObject({ trusted: false });
  });

  it.each([
    ['no mac at all', () => record(goodXml())],
    ['a forged mac', () => JSON.stringify({ ...JSON.parse(record(goodXml())), mac: 'ab'.repeat(32) })],
    ['a genuine record, altered', () => signRestoreRecord(record(goodXml()), KEY).replace('qemu-system-x86_64', 'qemu-system-i386')],
  ])('a planted record (%s): planRestore refuses it, typed, before anything is made', async (_what, value) => {
    plantSet(value());
    const h = host();
    const f = await failureOf(planRestore(h.deps)({ workflowId: 'restore-1', input: asInput() }));
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f.type).toBe(FailureType.RestoreRecordUntrusted);
    expect(f.nonRetryable).toBe(true);
    expect(h.defined).toEqual([]);
  });

  it('at define time too: a record replaced after the plan is refused, nothing defined', async () => {
    plantSet(signRestoreRecord(record(goodXml()), KEY));
    const h = host();
    const plan = (await planRestore(h.deps)({ workflowId: 'restore-1', input: asInput() })) as RestorePlan;
    plantSet(record(goodXml(`<hostdev mode='subsystem' type='pci'><source><address bus='0x03' slot='0x00'/></source></hostdev>`)));
    const f = await failureOf(defineRestoredDomain(h.deps)({ workflowId: 'restore-1', plan }));
    expect(f.type).toBe(FailureType.RestoreRecordUntrusted);
    expect(h.defined).toEqual([]);
  });

  it('a genuine record with a clean definition: planned and defined, as the restore’s own VM', async () => {
    plantSet(signRestoreRecord(record(goodXml()), KEY));
    const h = host();
    const plan = await planRestore(h.deps)({ workflowId: 'restore-1', input: asInput() });
    await defineRestoredDomain(h.deps)({ workflowId: 'restore-1', plan });
    expect(h.defined).toHaveLength(1);
    expect(h.defined[0]).toContain(`name='vms/g3-copy-vdb'`);
    expect(h.defined[0]).toContain(`${LAB}/a/g3-copy.serial.log`);
  });
});

describe('restore --as: the definition it yields is checked against an allow-list before anything is defined', () => {
  const planted: [string, string][] = [
    ['a PCI host device', `<hostdev mode='subsystem' type='pci'><source><address bus='0x03' slot='0x00'/></source></hostdev>`],
    ['a host block device as a cdrom', `<disk type='block' device='cdrom'><source dev='/dev/sda'/><target dev='hdc'/><readonly/></disk>`],
    ['a host file as a read-only disk', `<disk type='file' device='disk'><source file='/etc/shadow'/><target dev='vdz'/><readonly/></disk>`],
    ['the original VM’s disk, shared read-only', `<disk type='network' device='disk'><source protocol='rbd' name='vms/g1-vdb'/><target dev='vdz'/><readonly/></disk>`],
    ['a host directory passed through', `<filesystem type='mount'><source dir='/'/><target dir='root'/></filesystem>`],
    ['a serial log into /etc/cron.d', `<serial type='file'><source path='/etc/cron.d/x'/><target port='1'/></serial>`],
    ['a host serial device', `<serial type='dev'><source path='/dev/ttyS0'/><target port='1'/></serial>`],
    ['an interface script', `<interface type='ethernet'><script path='/tmp/x.sh'/></interface>`],
    ['a USB host device redirected', `<redirdev bus='usb' type='spicevmc'/>`],
  ];

  it.each(planted)('%s: a genuine-looking signed record still yields DefinitionRefused, nothing defined', async (_what, device) => {
    plantSet(signRestoreRecord(record(goodXml(device)), KEY));
    const h = host();
    const f = await failureOf(planRestore(h.deps)({ workflowId: 'restore-1', input: asInput() }));
    expect(f.type).toBe(FailureType.DefinitionRefused);
    expect(h.defined).toEqual([]);
  });

  it.each([
    ['qemu:commandline', (x: string) => x.replace('<devices>', `<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><qemu:arg value='-x'/></qemu:commandline><devices>`)],
    ['a default-namespace commandline', (x: string) => x.replace('<devices>', `<commandline xmlns='http://libvirt.org/schemas/domain/qemu/1.0'><arg value='-x'/></commandline><devices>`)],
    ['a DOCTYPE with an entity', (x: string) => `<!DOCTYPE domain [<!ENTITY h "<hostdev/>">]>\n${x}`],
    ['a kernel from /tmp', (x: string) => x.replace(`${LAB}/image/vmlinux`, '/tmp/evil')],
    ['an emulator from /tmp', (x: string) => x.replace('/usr/bin/qemu-system-x86_64', '/tmp/qemu')],
    ['a ceph.conf from /tmp (another cluster)', (x: string) => x.replace(CONF, '/tmp/ceph.conf')],
  ])('%s: refused', (_what, edit) => {
    const xml = edit(goodXml()).replace("name='vms/g3-vdb'", "name='vms/g3-copy-vdb'");
    expect(refusedDefinition(xml, { restoredDisks: new Set(['vms/g3-copy-vdb']), sourceVm: sourceVmPathsOf(goodXml()), cephConf: CONF })).not.toEqual([]);
  });

  it('the lab guest’s own definition passes; without the source VM on this host its private paths do not', () => {
    const xml = goodXml().replace("name='vms/g3-vdb'", "name='vms/g3-copy-vdb'");
    const ctx = { restoredDisks: new Set(['vms/g3-copy-vdb']), cephConf: CONF };
    expect(refusedDefinition(xml, { ...ctx, sourceVm: sourceVmPathsOf(goodXml()) })).toEqual([]);
    expect(refusedDefinition(xml, { ...ctx, sourceVm: NO_SOURCE_VM })).toEqual(expect.arrayContaining([expect.stringContaining(`${LAB}/a/serial.log`)]));
    expect(refusedDefinition(xml, { ...ctx, sourceVm: NO_SOURCE_VM, extraDirs: [LAB] }).filter((r) => !r.startsWith('boot file'))).toEqual([]);
  });
});

describe('the restore-record key', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-key-'));
  const keyring = path.join(dir, 'ceph.client.vmsnap.keyring');
  writeFileSync(keyring, '[client.admin]\n\tkey = AQAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAA==\n[client.vmsnap]\n\tkey = AQBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB==\n\tcaps mon = "profile rbd"\n');

  it('is derived from the worker’s own cephx secret (every worker holds it; the same on every host)', async () => {
    expect(cephxSecretOf(readFileSync(keyring, 'utf8'), 'client.vmsnap')).toBe('AQBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB==');
    const a = await loadRestoreRecordKey({ ceph: { conf: '/nonexistent', id: 'vmsnap', keyring } });
    const b = await loadRestoreRecordKey({ ceph: { conf: '/nonexistent', id: 'vmsnap', keyring } });
    const admin = await loadRestoreRecordKey({ ceph: { conf: '/nonexistent', id: 'admin', keyring } });
    expect(a.equals(b)).toBe(true);
    expect(a.equals(admin)).toBe(false);
  });

  it('or read from restoreRecordKeyFile; a short key or no key at all is refused', async () => {
    const file = path.join(dir, 'restore.key');
    writeFileSync(file, `${'f'.repeat(64)}\n`);
    expect((await loadRestoreRecordKey({ keyFile: file, ceph: { conf: '/nonexistent', id: 'vmsnap' } })).toString()).toBe('f'.repeat(64));
    writeFileSync(file, 'short\n');
    await expect(loadRestoreRecordKey({ keyFile: file, ceph: { conf: '/nonexistent', id: 'vmsnap' } })).rejects.toThrow(/at least 32/);
    await expect(loadRestoreRecordKey({ ceph: { conf: '/nonexistent', id: 'nobody', keyring } })).rejects.toThrow(/no restore-record key/);
  });
});
