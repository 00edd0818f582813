import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rbd } from '../../support/lab/cli-tools';
import { drSiteUp } from '../../support/lab/dr';
import { labVars, loadLabEnv, type LabDrEnv } from '../../support/lab/env';
import { startScratchGuest, type ScratchGuest } from '../../support/lab/scratch-guest';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { until } from '../helpers/until';

/*
 * DR mode (docs/dr.md) when the DR side fails, and `vmsnap doctor`'s DR checks, on the real lab: a
 * 1-disk guest of the test's own whose disk `vmsnap mirror enable` made mirror to the DR site
 * (lab/dr.sh). The DR site's daemons are stopped and started by their pid files, as lab/dr.sh
 * starts them; every cell leaves the DR site up.
 */
const env = loadLabEnv();
if (!env.guests) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);

let dr: LabDrEnv;
let guest: ScratchGuest;
let cli: NodeJS.ProcessEnv;

type Doctor = { ok: boolean; checks: { name: string; status: string; detail: string; fix?: string }[] };
const drLines = (d: Doctor) => d.checks.filter((c) => c.name.startsWith('dr '));

beforeAll(async () => {
  const t0 = performance.now();
  dr = await drSiteUp();
  cli = cliEnv(labVars(), { VMSNAP_DR_CEPH_CONF: dr.conf, VMSNAP_DR_CEPH_ID: dr.vmsnapId, VMSNAP_DR_CEPH_KEYRING: dr.vmsnapKeyring });
  guest = await startScratchGuest(env, env.guests!.oneDisk, { disks: 1 });
  const on = await vmsnapCli(['mirror', 'enable', guest.name, '--json'], cli);
  if (on.code !== 0) throw new Error(`mirror enable: ${on.stderr}`);
  console.log(`[dr-faults] DR site up, scratch guest ${guest.name} mirrored: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
});

afterAll(async () => {
  if (guest) await rbd(env, ['mirror', 'image', 'disable', `${env.pools.vm}/${guest.name}-vdb`]).catch(() => undefined);
  await guest?.remove();
});

describe('vmsnap doctor with a DR site', () => {
  it('every dr line is OK for a mirrored VM: the site, the pool’s peer, rbd-mirror running, the disk’s copy up+replaying', async () => {
    const t0 = performance.now();
    let last: Doctor | undefined;
    const d = await until('doctor to see the DR copy replaying', async () => {
      const r = await vmsnapCli(['doctor', '--domain', guest.name, '--json'], cli);
      const doc = json<Doctor>(r);
      last = doc;
      return drLines(doc).every((c) => c.status === 'ok') && drLines(doc).length === 4 ? doc : undefined;
    }, 90_000, 1000).catch((err: Error) => {
      throw new Error(`${err.message}; doctor's dr lines last:\n${drLines(last!).map((c) => `  ${c.status} ${c.name}: ${c.detail}`).join('\n')}`);
    });
    console.log(`[dr-faults] doctor all OK after ${((performance.now() - t0) / 1000).toFixed(1)} s:\n${drLines(d).map((c) => `  ${c.name}: ${c.detail}`).join('\n')}`);
    expect(drLines(d).map((c) => c.name)).toEqual(['dr site', `dr pool ${env.pools.vm}`, 'dr rbd-mirror', `dr domain ${guest.name} vdb`]);
    expect(drLines(d)[3]!.detail).toMatch(/DR copy up\+replaying, mirror snapshot \d+ copied/);
    expect(drLines(d)[1]!.detail).toContain(`peer ${dr.site} (tx-only)`);
  }, 150_000);
});
