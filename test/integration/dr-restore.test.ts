import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RadosCluster, openImage, type IoCtx } from '../../src/ceph';
import type { SnapshotResult } from '../../src/model/types';
import type { DrRestoreResult } from '../../src/cli/commands/dr-restore';
import { agentCommand, rbd, virsh } from '../../support/lab/cli-tools';
import { drQemuSecret, drRbd, drSiteUp } from '../../support/lab/dr';
import { loadLabEnv, type LabDrEnv } from '../../support/lab/env';
import { startScratchGuest, type ScratchGuest } from '../../support/lab/scratch-guest';
import { cliEnv, vmsnapCli } from '../helpers/cli';
import { startHarness, uniqueId, type Harness } from '../helpers/harness';
import { extendedDescribe, extendedIt } from '../helpers/lanes';

/*
 * Recovery on the DR site (docs/dr.md#recovery-on-the-dr-site) on the real lab: a 1-disk guest of
 * the test's own whose image mirrors to the DR site (lab/dr.sh), a quiesced DR run in
 * snapshot-only mode (its snapshot stays here, to compare with), then `vmsnap dr-restore` as a
 * host attached to the DR cluster runs it: the VM must boot on the DR cluster's images, from the
 * run's snapshot (not from the DR image's head, the crash-consistent state at the mirror snapshot),
 * and say quiesced as the run's record does. The primary site is "lost" by giving the CLI a
 * ceph.conf whose monitor does not answer; with the real one, reachable and still primary, the
 * CLI must refuse. Both sites are cleaned up: the guest's and the recovered VM's images are removed
 * on both clusters, so no other test's mirroring sees them.
 */
const env = loadLabEnv();
if (!env.guests) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);

let dr: LabDrEnv;
let h: Harness;
let guest: ScratchGuest;
let io: IoCtx;
let drCluster: RadosCluster;
let drIo: IoCtx;
let secret: { uuid: string; user: string };
let tmp: string;
const tag = Math.random().toString(16).slice(2, 10);
const recovered = `vmsnap-drr-${tag}`;
const booted = `vmsnap-drb-${tag}`;
/** The DR run the first case made: the second recovers from it too. */
let point: { workflowId: string; snap: string; primarySum: string } | undefined;
const image = () => `${guest.name}-vdb`;

beforeAll(async () => {
  const t0 = performance.now();
  const at: string[] = [];
  const mark = (what: string) => at.push(`${what} ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  dr = await drSiteUp();
  secret = await drQemuSecret(env, dr);
  mark('DR site and secret');
  guest = await startScratchGuest(env, env.guests!.oneDisk, { disks: 1 });
  mark('scratch guest ready');
  h = await startHarness({ config: { drCeph: { conf: dr.conf, id: dr.vmsnapId, keyring: dr.vmsnapKeyring } } });
  io = await (await h.hw.deps.rados()).openIoCtx(env.pools.vm);
  drCluster = await RadosCluster.connect({ conf: dr.conf, id: dr.adminId, keyring: dr.adminKeyring, connectTimeoutSec: 10 });
  drIo = await drCluster.openIoCtx(dr.pool);
  await rbd(env, ['mirror', 'image', 'enable', `${env.pools.vm}/${image()}`, 'snapshot']);
  tmp = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-drr-'));
  // A primary site that is gone: its monitor address answers nothing.
  writeFileSync(path.join(tmp, 'lost.conf'), '[global]\nmon_host = v2:127.0.0.1:9\nclient_mount_timeout = 3\n');
  mark('worker');
  console.log(`[dr-restore] setup (${guest.name}, load ${os.loadavg()[0]!.toFixed(1)}): ${at.join(', ')}`);
}, 180_000);

afterAll(async () => {
  for (const name of [recovered, booted]) {
    await virsh(env, ['destroy', name]).catch(() => undefined);
    await virsh(env, ['undefine', name]).catch(() => undefined);
  }
  await io?.close().catch(() => undefined);
  await drIo?.close().catch(() => undefined);
  await drCluster?.shutdown().catch(() => undefined);
  if (guest) {
    // Primary side first: with mirroring off here, rbd-mirror leaves the DR copy alone.
    await rbd(env, ['mirror', 'image', 'disable', '--force', `${env.pools.vm}/${image()}`]).catch(() => undefined);
    for (const name of [recovered, booted]) await drRbd(dr, ['rm', '--no-progress', `${dr.pool}/${name}-vdb`]).catch(() => undefined);
    await drRbd(dr, ['mirror', 'image', 'disable', '--force', `${dr.pool}/${image()}`]).catch(() => undefined);
    await drRbd(dr, ['snap', 'purge', '--no-progress', `${dr.pool}/${image()}`]).catch(() => undefined);
    await drRbd(dr, ['rm', '--no-progress', `${dr.pool}/${image()}`]).catch((e: Error) => console.log(`[dr-restore] DR image left: ${e.message}`));
  }
  await guest?.remove();
  await h?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}, 120_000);

function drEnv(primaryConf?: string): NodeJS.ProcessEnv {
  return cliEnv(h.vars, {
    VMSNAP_DR_CEPH_CONF: dr.conf,
    VMSNAP_DR_CEPH_ID: dr.vmsnapId,
    VMSNAP_DR_CEPH_KEYRING: dr.vmsnapKeyring,
    VMSNAP_RESTORE_KEY_FILE: h.vars.VMSNAP_RESTORE_KEY_FILE!,
    ...(primaryConf ? { VMSNAP_CEPH_CONF: primaryConf } : {}),
  });
}

async function drImageInfo(name: string): Promise<{ mirroring?: { primary: boolean }; parent?: { pool: string; image: string; snapshot: string } }> {
  return JSON.parse((await drRbd(dr, ['info', '--format', 'json', `${dr.pool}/${name}`])).stdout) as never;
}

async function primaryImageInfo(name: string): Promise<{ mirroring?: { primary: boolean } }> {
  return JSON.parse((await rbd(env, ['info', '--format', 'json', `${env.pools.vm}/${name}`])).stdout) as never;
}

async function sumOf(ioctx: IoCtx, name: string, snap?: string): Promise<string> {
  const img = await openImage(ioctx, name, { readOnly: true, ...(snap ? { snap } : {}) });
  try {
    return await img.checksum();
  } finally {
    await img.close();
  }
}

describe('dr-restore on the lab: the VM recovered on the DR site from the run’s quiesced snapshot', () => {
  it('refuses bad input and a primary still active before anything changes; with the primary lost, promotes the copy and defines the VM on the DR cluster’s clone of the run’s snapshot, quiesced as recorded', async () => {
    const workflowId = uniqueId('drr');
    const r = (await (
      await h.client.workflow.start('consistentSnapshot', {
        taskQueue: h.hw.taskQueue,
        workflowId,
        args: [{ domain: guest.name, quiesce: 'require', target: { clone: false, mirror: { waitMs: 120_000 } } }],
      })
    ).result()) as SnapshotResult;
    expect(r.quiesced).toBe(true);
    const snap = r.disks[0]!.snapshot.split('@')[1]!;
    const primarySum = await sumOf(io, image(), snap);
    const base = ['--as', recovered, '--secret', secret.uuid, '--json'];
    const unchanged = async () => {
      expect((await primaryImageInfo(image())).mirroring?.primary, 'the image is still primary at the primary site').toBe(true);
      expect((await drImageInfo(image())).mirroring?.primary, 'the DR copy is still non-primary').toBe(false);
      expect((await virsh(env, ['dominfo', recovered]).catch((e: Error) => e)) instanceof Error, `no domain ${recovered}`).toBe(true);
      expect((await drRbd(dr, ['ls', dr.pool])).stdout).not.toContain(recovered);
    };

    // Bad input, each typed, exit 2, nothing changed on either site.
    const refusals: [string[], NodeJS.ProcessEnv, string][] = [
      [['vmsnap-no-such-vm', ...base], drEnv(path.join(tmp, 'lost.conf')), 'DrPointNotFound'],
      [[guest.name, '--from', 'snap-not-on-the-dr-site', ...base], drEnv(path.join(tmp, 'lost.conf')), 'DrPointNotFound'],
      [[guest.name, '--from', workflowId, ...base], drEnv(), 'PrimaryStillActive'],
      // A planned failover would demote the disks beneath the running guest.
      [[guest.name, '--from', workflowId, '--planned', ...base], drEnv(), 'PrimaryInUse'],
    ];
    for (const [args, e, type] of refusals) {
      const out = await vmsnapCli(['dr-restore', ...args], e);
      expect(out.code, out.stdout + out.stderr).toBe(2);
      const doc = JSON.parse(out.stdout) as { error: { type: string; message: string } };
      expect(doc.error.type).toBe(type);
      console.log(`[dr-restore] refused ${type} in ${out.ms} ms: ${doc.error.message}`);
      await unchanged();
    }

    // The DR itself: the primary cannot be reached, so the copy is force-promoted. Not started
    // here (a TCG boot under load is the extended case below): the disk is what is checked.
    const out = await vmsnapCli(['dr-restore', guest.name, '--from', 'latest', '--verify', '--no-start', ...base], drEnv(path.join(tmp, 'lost.conf')));
    expect(out.code, out.stdout + out.stderr).toBe(0);
    const res = JSON.parse(out.stdout) as DrRestoreResult;
    console.log(`[dr-restore] recovered (not started) in ${out.ms} ms (CLI process), steps ${JSON.stringify(res.stepsMs)}; primary ${JSON.stringify(res.primary)}`);
    expect(res.from).toMatchObject({ workflowId, snapshot: snap, quiesced: true, domain: guest.name });
    expect(res.started).toBe(false);
    expect(res.primary.reachable).toBe(false);
    expect(res.promoted).toEqual([{ image: `${dr.pool}/${image()}`, force: true, already: false }]);
    expect((await drImageInfo(image())).mirroring?.primary, 'the DR copy was promoted').toBe(true);
    // Each disk: a clone of the run's snapshot on the DR site, with the bytes of the run's snapshot here.
    expect(res.disks).toHaveLength(1);
    const disk = res.disks[0]!;
    expect(disk).toMatchObject({ target: 'vdb', disk: `${dr.pool}/${recovered}-vdb`, from: `${dr.pool}/${image()}@${snap}` });
    expect(disk.sha256, 'the recovered disk: the bytes of the run’s snapshot on the primary').toBe(primarySum);
    expect((await drImageInfo(`${recovered}-vdb`)).parent).toMatchObject({ pool: dr.pool, image: image(), snapshot: snap });
    // The DR image's head (the state at the mirror snapshot, ~1 s after the thaw, probe writes in it) is another state.
    const headSum = await sumOf(drIo, image());
    console.log(`[dr-restore] sha256 of the run's snapshot ${primarySum.slice(0, 12)}…, of the DR image's head ${headSum.slice(0, 12)}…`);
    expect(headSum, 'the DR head differs from the quiesced snapshot (else this test could not tell them apart)').not.toBe(primarySum);
    // Defined, shut off, its disk on the DR cluster.
    expect((await virsh(env, ['domstate', recovered])).stdout.trim()).toBe('shut off');
    const xml = (await virsh(env, ['dumpxml', '--inactive', recovered])).stdout;
    expect(xml).toContain(`name='${dr.pool}/${recovered}-vdb'`);
    expect(xml).toContain(`<config file='${dr.conf}'/>`);
    expect(xml).toContain(`uuid='${secret.uuid}'`);
    expect(xml).not.toContain(`name='${env.pools.vm}/${image()}'`);
    point = { workflowId, snap, primarySum };
  }, 240_000);

  extendedIt('boots: the VM recovered from the same DR point (its copy already primary) runs on the DR cluster’s image and its agent answers', async () => {
    expect(point, 'the first case made the DR point').toBeDefined();
    const out = await vmsnapCli(['dr-restore', guest.name, '--from', point!.workflowId, '--as', booted, '--secret', secret.uuid, '--verify', '--json'], drEnv(path.join(tmp, 'lost.conf')));
    expect(out.code, out.stdout + out.stderr).toBe(0);
    const res = JSON.parse(out.stdout) as DrRestoreResult;
    console.log(`[dr-restore] recovered and booted in ${out.ms} ms (CLI process), steps ${JSON.stringify(res.stepsMs)}`);
    expect(res).toMatchObject({ started: true, from: { workflowId: point!.workflowId, snapshot: point!.snap, quiesced: true } });
    expect(res.promoted).toEqual([{ image: `${dr.pool}/${image()}`, force: false, already: true }]);
    expect(res.disks[0]!.sha256).toBe(point!.primarySum);
    const xml = (await virsh(env, ['dumpxml', booted])).stdout;
    expect(xml).toContain(`name='${dr.pool}/${booted}-vdb'`);
    expect(xml).toContain(`<config file='${dr.conf}'/>`);
    expect(await agentCommand(env, booted, 'guest-ping')).toEqual({});
  }, 300_000);
});

/*
 * A planned failover (docs/dr.md#planned-failover), extended lane: a guest of its own (a boot,
 * and its DR copy promoted at the end, so nothing else here can use it), a quiesced DR run, the
 * guest shut off, then `dr-restore --planned`: the primary's image demoted, the demotion copied
 * to the DR site, the copy promoted without force, the disk a clone of the run's snapshot.
 */
extendedDescribe('dr-restore --planned on the lab', () => {
  let planned: ScratchGuest;
  const as = `vmsnap-drp-${tag}`;
  const disk = () => `${planned.name}-vdb`;

  beforeAll(async () => {
    planned = await startScratchGuest(env, env.guests!.oneDisk, { disks: 1 });
    await rbd(env, ['mirror', 'image', 'enable', `${env.pools.vm}/${disk()}`, 'snapshot']);
  }, 180_000);

  afterAll(async () => {
    await virsh(env, ['undefine', as]).catch(() => undefined);
    if (!planned) return;
    await rbd(env, ['mirror', 'image', 'disable', '--force', `${env.pools.vm}/${disk()}`]).catch(() => undefined);
    await drRbd(dr, ['rm', '--no-progress', `${dr.pool}/${as}-vdb`]).catch(() => undefined);
    await drRbd(dr, ['mirror', 'image', 'disable', '--force', `${dr.pool}/${disk()}`]).catch(() => undefined);
    await drRbd(dr, ['snap', 'purge', '--no-progress', `${dr.pool}/${disk()}`]).catch(() => undefined);
    await drRbd(dr, ['rm', '--no-progress', `${dr.pool}/${disk()}`]).catch((e: Error) => console.log(`[dr-restore] DR image left: ${e.message}`));
    await planned.remove();
  }, 120_000);

  extendedIt('with the primary VM shut off: demoted there, the demotion waited for, promoted here without force, the VM defined on the clone of the run’s snapshot', async () => {
    const workflowId = uniqueId('drp');
    const r = (await (
      await h.client.workflow.start('consistentSnapshot', {
        taskQueue: h.hw.taskQueue,
        workflowId,
        args: [{ domain: planned.name, quiesce: 'require', target: { clone: false, mirror: { waitMs: 120_000 } } }],
      })
    ).result()) as SnapshotResult;
    expect(r.quiesced).toBe(true);
    const snap = r.disks[0]!.snapshot.split('@')[1]!;
    const primarySum = await sumOf(io, disk(), snap);
    await virsh(env, ['destroy', planned.name]);
    const out = await vmsnapCli(['dr-restore', planned.name, '--from', workflowId, '--planned', '--no-start', '--verify', '--as', as, '--secret', secret.uuid, '--json'], drEnv());
    expect(out.code, out.stdout + out.stderr).toBe(0);
    const res = JSON.parse(out.stdout) as DrRestoreResult;
    console.log(`[dr-restore] planned failover in ${out.ms} ms (CLI process), steps ${JSON.stringify(res.stepsMs)}`);
    expect(res.demoted).toEqual([`${env.pools.vm}/${disk()}`]);
    expect(res.promoted).toEqual([{ image: `${dr.pool}/${disk()}`, force: false, already: false }]);
    expect(res.primary).toMatchObject({ reachable: true, images: [{ image: `${env.pools.vm}/${disk()}`, state: 'primary' }] });
    expect((await primaryImageInfo(disk())).mirroring?.primary, 'demoted at the primary site').toBe(false);
    expect((await drImageInfo(disk())).mirroring?.primary, 'promoted on the DR site').toBe(true);
    expect(res.disks[0]!.sha256, 'the recovered disk: the bytes of the run’s snapshot on the primary').toBe(primarySum);
    expect((await virsh(env, ['domstate', as])).stdout.trim()).toBe('shut off');
  }, 300_000);
});
