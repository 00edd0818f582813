import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rbd, virsh } from '../../support/lab/cli-tools';
import { drRbd, drSiteUp } from '../../support/lab/dr';
import { labVars, loadLabEnv, type LabDrEnv } from '../../support/lab/env';
import { startScratchGuest, type ScratchGuest } from '../../support/lab/scratch-guest';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { extendedIt } from '../helpers/lanes';
import { until } from '../helpers/until';

/*
 * `vmsnap mirror enable|status|disable <domain>` (docs/dr.md#setting-it-up) against the lab and its
 * DR site (lab/dr.sh: the lab's `vms` pool mirrors in image mode, the DR site's rbd-mirror pulls it;
 * the `images` pool does not mirror). The oracle is Ceph's own `rbd` CLI, never vmsnap's reading.
 * Domains: a defined, never started one whose disks are the test's own images (Ceph's refusal
 * paths and the exclusive-lock step need images nobody holds), and a running scratch guest (the
 * change goes through its QEMU, the image's lock owner).
 */
const env = loadLabEnv();
if (!env.guests) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);

let dr: LabDrEnv;
let cli: NodeJS.ProcessEnv;
let guest: ScratchGuest | undefined;
const parked = `vmsnap-mirror-${randomUUID().slice(0, 8)}`;
const vmsImage = `${parked}-vdb`;
const otherImage = `${parked}-vdc`;
const parkedUuid = randomUUID();
const xmlFile = path.join(tmpdir(), `${parked}.xml`);

/** A domain that is defined and never started, with these RBD disks (pool/image). */
async function defineParked(disks: string[]): Promise<void> {
  const devs = disks.map(
    (spec, i) => `<disk type='network' device='disk'><driver name='qemu' type='raw'/><source protocol='rbd' name='${spec}'><host name='127.0.0.1' port='3300'/></source><target dev='vd${'bcd'[i]}' bus='virtio'/></disk>`,
  );
  writeFileSync(xmlFile, `<domain type='qemu'><name>${parked}</name><uuid>${parkedUuid}</uuid><memory unit='MiB'>64</memory><os><type arch='x86_64'>hvm</type></os><devices>${devs.join('')}</devices></domain>`);
  await virsh(env, ['define', xmlFile]);
}

type RbdInfo = { features: string[]; mirroring?: { state: string; mode: string; primary: boolean; global_id: string } };
const rbdInfo = async (spec: string): Promise<RbdInfo> => JSON.parse((await rbd(env, ['info', spec, '--format', 'json'])).stdout) as RbdInfo;
const features = async (spec: string) => (await rbdInfo(spec)).features;
/** `rbd info`'s mirroring, or 'disabled' (it prints none for an image that does not mirror). */
async function mirrorOf(spec: string): Promise<{ state: string; mode?: string; primary?: boolean; globalId?: string }> {
  const m = (await rbdInfo(spec)).mirroring;
  return m ? { state: m.state, mode: m.mode, primary: m.primary, globalId: m.global_id } : { state: 'disabled' };
}

type Status = {
  pools: { spec: string; mode: string; peers: { site: string; direction: string }[] }[];
  drSite: { fsid: string };
  disks: { target: string; state: string; mode: string; primary: boolean; sites: { site: string; status: string }[]; drSite: { present: boolean; primary?: boolean; daemon?: { status: string }; lastCopied?: { primarySnapId: number; drSnapId: number } } }[];
};

/** `vmsnap mirror status` until its one disk's DR copy is replaying with a mirror snapshot copied in full. */
async function statusReplaying(domain: string): Promise<Status> {
  const t0 = performance.now();
  const s = await until('status to show the DR copy replaying', async () => {
    const r = await vmsnapCli(['mirror', 'status', domain, '--json'], cli);
    expect(r.code, r.stderr).toBe(0);
    const doc = json<Status>(r);
    const d = doc.disks[0]!;
    return d.drSite.lastCopied && d.drSite.daemon?.status === 'up+replaying' ? doc : undefined;
  }, 60_000, 500);
  console.log(`[cli-mirror] status showed the DR copy of ${domain} replaying after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return s;
}

/** The DR cluster's own CLI (the oracle): its copy does not mirror as primary, and holds a complete non-primary mirror snapshot. */
async function drCopyOf(image: string): Promise<{ primary: boolean; completeMirrorSnaps: number }> {
  const info = JSON.parse((await drRbd(dr, ['info', `${dr.pool}/${image}`, '--format', 'json'])).stdout) as RbdInfo;
  const snaps = JSON.parse((await drRbd(dr, ['snap', 'ls', '--all', `${dr.pool}/${image}`, '--format', 'json'])).stdout) as { namespace: { type: string; state?: string; complete?: boolean } }[];
  return { primary: info.mirroring!.primary, completeMirrorSnaps: snaps.filter((x) => x.namespace.type === 'mirror' && x.namespace.state === 'non-primary' && x.namespace.complete).length };
}

beforeAll(async () => {
  const t0 = performance.now();
  dr = await drSiteUp();
  cli = cliEnv(labVars(), { VMSNAP_DR_CEPH_CONF: dr.conf, VMSNAP_DR_CEPH_ID: dr.vmsnapId, VMSNAP_DR_CEPH_KEYRING: dr.vmsnapKeyring });
  // layering only: no exclusive-lock, which enable must add.
  await rbd(env, ['create', '--size', '16M', '--image-feature', 'layering', `${env.pools.vm}/${vmsImage}`]);
  await rbd(env, ['create', '--size', '16M', `${env.pools.image}/${otherImage}`]);
  console.log(`[cli-mirror] DR site up, images created: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
});

afterAll(async () => {
  await virsh(env, ['undefine', parked]).catch(() => undefined);
  rmSync(xmlFile, { force: true });
  for (const spec of [`${env.pools.vm}/${vmsImage}`, `${env.pools.image}/${otherImage}`]) {
    await rbd(env, ['mirror', 'image', 'disable', spec]).catch(() => undefined);
    await rbd(env, ['rm', '--no-progress', spec]).catch(() => undefined);
  }
  if (guest) for (const t of ['vdb']) await rbd(env, ['mirror', 'image', 'disable', `${env.pools.vm}/${guest.name}-${t}`]).catch(() => undefined);
  await guest?.remove();
});

describe('vmsnap mirror enable|status|disable', () => {
  it('bad input exits 2 before anything is contacted or changed: unknown domain, unknown flag, bad --timeout', async () => {
    const unknown = await vmsnapCli(['mirror', 'enable', 'no-such-domain-x', '--json'], cli);
    expect(unknown.code).toBe(2);
    expect(json<{ error: { type: string } }>(unknown).error.type).toBe('DomainNotFound');
    const flag = await vmsnapCli(['mirror', 'enable', parked, '--force'], cli);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--force'");
    const timeout = await vmsnapCli(['mirror', 'disable', parked, '--timeout', '10'], cli);
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toContain('--timeout');
  });

  it('refuses, exit 2 and nothing changed, when a disk’s pool does not mirror in image mode, naming the Ceph command', async () => {
    await defineParked([`${env.pools.vm}/${vmsImage}`, `${env.pools.image}/${otherImage}`]);
    const r = await vmsnapCli(['mirror', 'enable', parked, '--json'], cli);
    expect(r.code, r.stderr).toBe(2);
    const err = json<{ error: { type: string; message: string } }>(r).error;
    expect(err.type).toBe('MirrorPoolNotReady');
    expect(err.message).toContain(`rbd mirror pool enable ${env.pools.image} image`);
    console.log(`[cli-mirror] refused: ${err.message}`);
    // The vms disk, whose pool is ready, was not touched either.
    expect(await features(`${env.pools.vm}/${vmsImage}`)).not.toContain('exclusive-lock');
    expect(await mirrorOf(`${env.pools.vm}/${vmsImage}`)).toEqual({ state: 'disabled' });
  });

  it('enable adds exclusive-lock and snapshot-mode mirroring, twice is the same state (exit 0); status shows the DR copy replaying; disable twice likewise', async () => {
    const spec = `${env.pools.vm}/${vmsImage}`;
    await defineParked([spec]);
    const first = await vmsnapCli(['mirror', 'enable', parked, '--json'], cli);
    expect(first.code, first.stderr).toBe(0);
    const a = json<{ ok: boolean; disks: { target: string; changed: boolean; steps: string[]; globalId: string }[] }>(first);
    expect(a.disks).toMatchObject([{ target: 'vdb', changed: true, steps: ['exclusive-lock', 'mirror-enable'] }]);
    expect(await features(spec)).toContain('exclusive-lock');
    const m = await mirrorOf(spec);
    expect(m).toMatchObject({ state: 'enabled', mode: 'snapshot', primary: true, globalId: a.disks[0]!.globalId });

    const again = await vmsnapCli(['mirror', 'enable', parked, '--json'], cli);
    expect(again.code, again.stderr).toBe(0);
    expect(json<{ disks: unknown[] }>(again).disks).toMatchObject([{ target: 'vdb', changed: false, steps: [] }]);
    expect(await mirrorOf(spec)).toEqual(m);

    const st = await statusReplaying(parked);
    expect(st.pools).toMatchObject([{ spec: env.pools.vm, mode: 'image' }]);
    expect(st.pools[0]!.peers).toContainEqual(expect.objectContaining({ site: dr.site, direction: 'tx-only' }));
    expect(st.drSite.fsid).toMatch(/^[0-9a-f-]{36}$/);
    expect(st.disks[0]).toMatchObject({ target: 'vdb', state: 'enabled', mode: 'snapshot', primary: true, drSite: { present: true, primary: false } });
    expect(await drCopyOf(vmsImage)).toEqual({ primary: false, completeMirrorSnaps: expect.any(Number) as number });
    expect((await drCopyOf(vmsImage)).completeMirrorSnaps).toBeGreaterThan(0);
    const human = await vmsnapCli(['mirror', 'status', parked], cli);
    expect(human.stdout).toContain('enabled, snapshot mode, primary');
    expect(human.stdout).toContain('rbd-mirror up+replaying');

    const off = await vmsnapCli(['mirror', 'disable', parked, '--json'], cli);
    expect(off.code, off.stderr).toBe(0);
    expect(json<{ disks: unknown[] }>(off).disks).toMatchObject([{ changed: true, steps: ['mirror-disable'], after: 'not mirrored' }]);
    expect(await mirrorOf(spec)).toEqual({ state: 'disabled' });
    const offAgain = await vmsnapCli(['mirror', 'disable', parked, '--json'], cli);
    expect(offAgain.code, offAgain.stderr).toBe(0);
    expect(json<{ disks: unknown[] }>(offAgain).disks).toMatchObject([{ changed: false, steps: [] }]);
    // Features stay: disable changes mirroring only.
    expect(await features(spec)).toContain('exclusive-lock');
  });

  extendedIt('a running VM: enable and disable go through its QEMU (the lock owner); status shows its DR copy replaying', async () => {
    const t0 = performance.now();
    guest = await startScratchGuest(env, env.guests!.oneDisk, { disks: 1 });
    console.log(`[cli-mirror] scratch guest ${guest.name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const spec = `${env.pools.vm}/${guest.name}-vdb`;
    const on = await vmsnapCli(['mirror', 'enable', guest.name, '--json'], cli);
    expect(on.code, on.stderr).toBe(0);
    expect(await mirrorOf(spec)).toMatchObject({ state: 'enabled', mode: 'snapshot', primary: true });
    const st = await statusReplaying(guest.name);
    expect(st.disks[0]).toMatchObject({ state: 'enabled', mode: 'snapshot', primary: true, drSite: { present: true, primary: false } });
    expect((await drCopyOf(`${guest.name}-vdb`)).primary).toBe(false);
    const off = await vmsnapCli(['mirror', 'disable', guest.name, '--json'], cli);
    expect(off.code, off.stderr).toBe(0);
    expect(await mirrorOf(spec)).toEqual({ state: 'disabled' });
  }, 180_000);
});
