import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeRestorePoint, RESTORE_POINT_KEY, RESTORE_POINT_VERSION } from '../../src/model/restore-point';
import type { RestorePoint } from '../../src/model/restore-point';
import type { SnapshotResult } from '../../src/model/types';
import { restorePointMac } from '../../src/restore/record-mac';
import { need } from '../../support/lab/env';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { ensureThawed, virsh } from '../helpers/guest';
import { startHarness, uniqueId } from '../helpers/harness';
import { WorkerProcess } from '../helpers/worker-process';
import { failureOf } from '../helpers/failure-of';
import type { Harness } from '../helpers/harness';

/*
 * Issue 25 #9, the trust boundary: anyone who can write image metadata in the images pool can
 * write a restore record. A record vmsnap did not write (no MAC, or a MAC that does not match its
 * contents), and a signed one whose definition hands the new VM a host device, are refused by
 * `restore --as` with a typed error before anything is defined or created; so is every record on
 * a worker that has no restore key.
 */

let h: Harness;
let ceph: CephView;
let env: NodeJS.ProcessEnv;
let g1: string;
let snap: SnapshotResult;
let image: string;
let genuine: string;

beforeAll(async () => {
  h = await startHarness();
  ceph = new CephView(h.vars);
  env = cliEnv(h.vars, { VMSNAP_HOST: h.config.host });
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
  snap = await h.client.workflow.execute('consistentSnapshot', {
    taskQueue: h.hw.taskQueue,
    workflowId: uniqueId('snap-trust'),
    args: [{ domain: g1, quiesce: 'require' }],
  });
  image = snap.disks[0]!.image!;
  genuine = (await ceph.meta('images', image.split('/')[1]!))[RESTORE_POINT_KEY]!;
}, 600_000);

afterAll(async () => {
  if (snap) await ceph.removeResultImages(snap);
  if (g1) await ensureThawed(h.vars, g1);
  await h?.stop();
}, 300_000);

const plant = (value: string) => ceph.rbd('image-meta', 'set', image, RESTORE_POINT_KEY, value);
const record = (): RestorePoint => decodeRestorePoint(genuine)!;
const withDevice = (xml: string, device: string) => xml.replace('</devices>', `${device}\n  </devices>`);
const HOSTDEV = "<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' bus='0x00' slot='0x1f' function='0x0'/></source></hostdev>";
const SHADOW = "<disk type='file' device='disk'><source file='/etc/shadow'/><target dev='vdz' bus='virtio'/></disk>";

/** `restore --as` of the planted record: refused, typed, exit 2, and nothing defined or created. */
async function refused(type: string, message: RegExp, e: NodeJS.ProcessEnv = env, pin: string[] = []): Promise<void> {
  const name = uniqueId('vmsnap-planted');
  const vmsBefore = await ceph.images('vms');
  const domainsBefore = await virsh(h.vars, 'list', '--all', '--name');
  const r = await vmsnapCli(['restore', g1, '--from', snap.workflowId, '--as', name, '--wait', '--json', '--workflow-id', uniqueId('restore-planted'), ...pin], e, 300_000);
  expect(r.code, r.stderr + r.stdout).toBe(2);
  expect(json<{ type: string; message: string }>(r)).toMatchObject({ type, message: expect.stringMatching(message) });
  expect(await ceph.images('vms')).toEqual(vmsBefore);
  expect(await virsh(h.vars, 'list', '--all', '--name')).toEqual(domainsBefore);
  expect(await virsh(h.vars, 'domstate', name).catch(() => 'absent')).toBe('absent');
}

describe('restore --as trusts a record only if vmsnap wrote it', () => {
  it('the run’s own record is signed with the fleet key', () => {
    expect(record().mac).toMatch(/^hmac-sha256:[0-9a-f]{16}:[0-9a-f]{64}$/);
  });

  it('a planted record without a MAC, its definition adding a <hostdev>: RestoreRecordUntrusted', async () => {
    const { mac: _mac, ...rest } = record();
    await plant(JSON.stringify({ ...rest, domainXml: withDevice(rest.domainXml, HOSTDEV) }));
    try {
      await refused('RestoreRecordUntrusted', /carries no MAC/);
    } finally {
      await plant(genuine);
    }
  }, 600_000);

  it('the genuine record with a file disk at /etc/shadow added under its MAC: RestoreRecordUntrusted', async () => {
    const p = record();
    await plant(JSON.stringify({ ...p, domainXml: withDevice(p.domainXml, SHADOW) }));
    try {
      await refused('RestoreRecordUntrusted', /does not match its contents/);
    } finally {
      await plant(genuine);
    }
  }, 600_000);

  it('a signed record whose VM has a host device: DefinitionRefused (the allow-list holds even for vmsnap’s own records)', async () => {
    const key = Buffer.from(readFileSync(need(h.vars, 'VMSNAP_RESTORE_KEY_FILE'), 'utf8').trim(), 'utf8');
    const { mac: _mac, ...p } = record();
    const withHostdev = { ...p, domainXml: withDevice(p.domainXml, HOSTDEV) };
    await plant(JSON.stringify({ ...withHostdev, mac: restorePointMac({ ...withHostdev, v: RESTORE_POINT_VERSION }, key) }));
    try {
      await refused('DefinitionRefused', /a host device \(<hostdev>\)/);
    } finally {
      await plant(genuine);
    }
  }, 600_000);

  it('a record changed after planning (the disks already cloned): the define step reads it again and refuses it, and the clones are removed', async () => {
    const w = new WorkerProcess(h.vars, `trust-late-${Date.now().toString(36)}`);
    // A stall after the clone, long enough to change the record before the define step reads it.
    await w.start({ points: ['restore:after-clone'], pauseMs: 10_000 });
    const name = uniqueId('vmsnap-late');
    const vmsBefore = await ceph.images('vms');
    try {
      const run = h.client.workflow.execute('restoreVm', {
        taskQueue: w.taskQueue,
        workflowId: uniqueId('restore-late'),
        args: [{ domain: g1, from: snap.workflowId, as: name }],
      });
      run.catch(() => undefined); // awaited below, after the record is changed
      await w.reached('restore:after-clone', 120_000);
      const p = record();
      await plant(JSON.stringify({ ...p, domainXml: withDevice(p.domainXml, SHADOW) }));
      const f = await failureOf(run);
      expect(f).toMatchObject({ type: 'RestoreRecordUntrusted', message: expect.stringMatching(/does not match its contents/) });
      expect(await virsh(h.vars, 'domstate', name).catch(() => 'absent')).toBe('absent');
      expect(await ceph.images('vms')).toEqual(vmsBefore);
    } finally {
      await plant(genuine);
      await w.stop();
    }
  }, 600_000);

  it('a worker without the restore key refuses even the genuine record, naming the fix', async () => {
    const keyless = await startHarness({ config: { restoreKeyFile: '/nonexistent/restore.key' } });
    try {
      await refused('RestoreRecordUntrusted', /no restore key at \/nonexistent\/restore\.key.*VMSNAP_RESTORE_KEY_FILE/, cliEnv(h.vars, { VMSNAP_HOST: keyless.config.host }), [
        // Pinned: two workers on one libvirtd both hold g1, so the fleet could place it beside either.
        '--host',
        keyless.config.host,
      ]);
    } finally {
      await keyless.stop();
    }
  }, 600_000);
});
