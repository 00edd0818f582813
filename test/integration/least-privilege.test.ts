import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import { inspectDomain } from '../../activities/inspect';
import { loadConfig } from '../../src/config';
import { isReadOnlyDenied, LibvirtClient } from '../../src/libvirt';
import { createHostDeps } from '../../src/worker/host-deps';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { CephView } from '../helpers/ceph-inspect';
import { need } from '../../support/lab/env';

const run = promisify(execFile);

/*
 * vmsnap's worker runs with a cephx key limited to `profile rbd` on the VM and image pools. This
 * runs the whole workflow with that key, shows the key is useless on a third pool, and scans a
 * run's full history and the worker's logs for key material.
 */
let h: Harness;
let ceph: CephView;

beforeAll(async () => {
  h = await startHarness();
  ceph = new CephView(h.vars);
});
afterAll(async () => h?.stop());

function cephxKey(keyringPath: string): string {
  const m = /key\s*=\s*(\S+)/.exec(readFileSync(keyringPath, 'utf8'));
  if (!m) throw new Error(`no key in ${keyringPath}`);
  return m[1];
}

async function asVmsnap(...args: string[]): Promise<{ ok: boolean; err: string }> {
  try {
    await run('rbd', ['-c', need(h.vars, 'CEPH_CONF'), '--id', need(h.vars, 'CEPH_VMSNAP_ID'), '--keyring', need(h.vars, 'CEPH_VMSNAP_KEYRING'), ...args], { timeout: 60_000 });
    return { ok: true, err: '' };
  } catch (e) {
    return { ok: false, err: String((e as { stderr?: string }).stderr ?? e) };
  }
}

describe('least privilege', () => {
  it('the whole workflow runs with the restricted client.vmsnap key, and leaks no key material', async () => {
    expect(h.config.ceph.id).toBe(need(h.vars, 'CEPH_VMSNAP_ID'));
    const id = uniqueId('lp');
    const result: SnapshotResult = await h.client.workflow.execute('consistentSnapshot', {
      taskQueue: h.hw.taskQueue,
      workflowId: id,
      args: [{ domain: need(h.vars, 'VMSNAP_GUEST_1DISK'), quiesce: 'require' }],
    });
    expect(result.quiesced).toBe(true);

    const history = JSON.stringify(await h.client.workflow.getHandle(id).fetchHistory());
    const logs = h.logs.join('');
    for (const keyring of [need(h.vars, 'CEPH_VMSNAP_KEYRING'), need(h.vars, 'CEPH_KEYRING')]) {
      const key = cephxKey(keyring);
      expect(history).not.toContain(key);
      expect(logs).not.toContain(key);
      // The keyring's path is configuration, not input: it is not in the history either.
      expect(history).not.toContain(keyring);
    }
    expect(history).not.toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY-----/);
    expect(logs).not.toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY-----/);
    await ceph.removeResultImages(result);
  });

  it('the same key cannot create, read or delete images in a third pool', async () => {
    const other = need(h.vars, 'VMSNAP_OTHER_POOL');
    const mine = `lp-${uniqueId('x')}`;
    expect((await asVmsnap('create', '--size', '4M', `${other}/${mine}`)).ok).toBe(false);
    // An image the admin made there: our key can neither read nor remove it.
    const theirs = `lp-admin-${uniqueId('x')}`;
    await ceph.rbd('create', '--size', '4M', `${other}/${theirs}`);
    try {
      const read = await asVmsnap('export', '--no-progress', `${other}/${theirs}`, '/dev/null');
      expect(read.ok).toBe(false);
      expect(read.err).toMatch(/Operation not permitted|permission denied|EPERM|error opening/i);
      expect((await asVmsnap('rm', '--no-progress', `${other}/${theirs}`)).ok).toBe(false);
      expect(await ceph.images(other)).toContain(theirs);
    } finally {
      await ceph.removeImage(other, theirs);
    }
    // ...while it can in the pools it is meant for.
    const vm = need(h.vars, 'VMSNAP_VM_POOL');
    expect((await asVmsnap('create', '--size', '4M', `${vm}/${mine}`)).ok).toBe(true);
    expect((await asVmsnap('rm', '--no-progress', `${vm}/${mine}`)).ok).toBe(true);
  });
});

describe('libvirt: read-only where possible', () => {
  const roUri = () => need(h.vars, 'LIBVIRT_DEFAULT_URI').replace(/libvirt-sock$/, 'libvirt-sock-ro');

  it('inspection needs only the read-only socket (the read-write one here does not exist)', async () => {
    const config = loadConfig(
      { ...h.config, libvirt: { uri: 'qemu:///system?socket=/nonexistent/libvirt-sock', readOnlyUri: roUri() }, metricsPort: 0 },
      {},
      undefined,
    );
    const deps = createHostDeps(config);
    try {
      const r = await inspectDomain(deps)({ domain: need(h.vars, 'VMSNAP_GUEST_3DISK'), quiesce: 'skip', agentTimeoutSec: 5, targetPool: 'images' });
      expect(r.disks.filter((d) => d.rbd)).toHaveLength(3);
      // The same deps cannot reach libvirt read-write at all: nothing above needed it.
      await expect(deps.libvirt()).rejects.toThrow(/nonexistent/);
    } finally {
      await deps.close();
    }
  });

  it('libvirtd refuses agent commands, freeze and thaw on a read-only connection (error 29)', async () => {
    const ro = await LibvirtClient.connect({ uri: need(h.vars, 'LIBVIRT_DEFAULT_URI'), readOnly: true });
    const rw = await LibvirtClient.connect({ uri: need(h.vars, 'LIBVIRT_DEFAULT_URI') });
    try {
      const dom = await ro.lookupDomainByName(need(h.vars, 'VMSNAP_GUEST_1DISK'));
      expect((await ro.getDomainState(dom)).state).toBe('running');
      for (const call of [() => ro.guestPing(dom, 5), () => ro.fsFreeze(dom, []), () => ro.fsThaw(dom, [])]) {
        const err = await call().then(() => undefined, (e: unknown) => e);
        expect(isReadOnlyDenied(err), String(err)).toBe(true);
      }
      expect(await rw.fsFreezeStatus(dom, 5)).toBe('thawed');
    } finally {
      await ro.close();
      await rw.close();
    }
  });
});
