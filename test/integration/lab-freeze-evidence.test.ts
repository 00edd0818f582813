import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { agentCommand, rbd, virsh } from '../../support/lab/cli-tools';
import { loadLabEnv } from '../../support/lab/env';
import { ctlSocketPath, guestCtlOk } from '../../support/lab/guest-ctl';
import { longestGapPerDisk, readTicks, snapshotFsState, type ProbeTick } from '../../support/lab/probe';

// Proof that a freeze through libvirt really freezes the guest's filesystems: the guest's probe
// writer is blocked for the whole frozen interval (its writes resume after the thaw), and an RBD
// snapshot taken while frozen holds a clean ext4, while one taken under writes needs recovery.
// A no-op freeze fails the gap assertions (see the control case: the probe's normal gaps are far
// shorter than the frozen interval).
const env = loadLabEnv();
const guests = env.guests;
if (!guests || !env.libvirt) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);

const HOLD_MS = 2000;
/** How late a completed write may be stamped on the host (console path; loaded 2-core host). */
const STAMP_LAG_MS = 300;
/** Upper slack: one probe period plus stamping lag, generous for a saturated host. */
const UPPER_SLACK_MS = 1500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const snapshots: string[] = []; // pool/image@snap specs to remove after each test
const frozenDomains = new Set<string>();

afterEach(async () => {
  for (const domain of frozenDomains) await virsh(env, ['domfsthaw', domain]).catch(() => undefined);
  frozenDomains.clear();
  for (const spec of snapshots.splice(0)) await rbd(env, ['snap', 'rm', '--no-progress', spec]).catch(() => undefined);
});

function disksOf(domain: string): string[] {
  return domain === guests?.threeDisk ? ['vdb', 'vdc', 'vdd'] : ['vdb'];
}

async function ensureProbeTicking(domain: string): Promise<void> {
  await guestCtlOk(ctlSocketPath(guests!.probeDir, domain), { command: 'probe-start' });
  const since = Date.now();
  for (let i = 0; i < 50; i++) {
    const ticks = await readTicks(domain, since);
    if (disksOf(domain).every((d) => ticks.filter((t) => t.disk === d).length >= 3)) return;
    await sleep(200);
  }
  throw new Error(`${domain}: probe not ticking`);
}

/** Wait until every disk reported at least `n` writes after `since`; return all ticks from `from`. */
async function ticksAfter(domain: string, from: number, since: number, n = 3): Promise<ProbeTick[]> {
  for (let i = 0; i < 50; i++) {
    const ticks = await readTicks(domain, from);
    if (disksOf(domain).every((d) => ticks.filter((t) => t.disk === d && t.hostMs > since).length >= n)) return ticks;
    await sleep(200);
  }
  throw new Error(`${domain}: writes did not resume after ${new Date(since).toISOString()}`);
}

async function snap(domain: string, disk: string, tag: string): Promise<string> {
  const image = `${domain}-${disk}`;
  const name = `lab-probe-${tag}-${randomBytes(4).toString('hex')}`;
  const spec = `${env.pools.vm}/${image}@${name}`;
  snapshots.push(spec);
  await rbd(env, ['snap', 'create', spec]);
  return name;
}

function fsState(domain: string, disk: string, snapName: string) {
  return snapshotFsState({
    cephConf: env.ceph.conf,
    id: env.ceph.adminId,
    keyring: env.ceph.adminKeyring,
    pool: env.pools.vm,
    image: `${domain}-${disk}`,
    snap: snapName,
  });
}

interface FreezeRun {
  frozenFrom: number; // host ms when domfsfreeze returned (filesystems frozen by then)
  frozenTo: number; // host ms just before domfsthaw was called (still frozen until then)
  outerFrom: number; // before domfsfreeze was called
  outerTo: number; // after domfsthaw returned
  snaps: Map<string, string>; // disk -> snapshot taken while frozen
}

async function freezeHoldSnapshotThaw(domain: string): Promise<FreezeRun> {
  const outerFrom = Date.now();
  frozenDomains.add(domain);
  const { stdout } = await virsh(env, ['domfsfreeze', domain]);
  const frozenFrom = Date.now();
  expect(stdout).toContain(`Froze ${disksOf(domain).length} filesystem(s)`);
  const snaps = new Map<string, string>();
  for (const disk of disksOf(domain)) snaps.set(disk, await snap(domain, disk, 'frozen'));
  await sleep(Math.max(0, frozenFrom + HOLD_MS - Date.now()));
  expect(await agentCommand(env, domain, 'guest-fsfreeze-status')).toBe('frozen');
  const frozenTo = Date.now();
  await virsh(env, ['domfsthaw', domain]);
  const outerTo = Date.now();
  frozenDomains.delete(domain);
  return { frozenFrom, frozenTo, outerFrom, outerTo, snaps };
}

describe('freeze evidence', () => {
  it('control: without a freeze the probe never stops for long (so a no-op freeze would fail)', async () => {
    const domain = guests.oneDisk;
    await ensureProbeTicking(domain);
    const from = Date.now();
    await sleep(HOLD_MS + 500);
    const to = Date.now();
    const ticks = await readTicks(domain, from - 1000);
    const gap = longestGapPerDisk(ticks, from, to).get('vdb');
    expect(gap).toBeDefined();
    // The freeze assertions below require a gap >= HOLD_MS - STAMP_LAG_MS.
    expect(gap!.ms).toBeLessThan(HOLD_MS - STAMP_LAG_MS);
  });

  it.each([guests.oneDisk, guests.threeDisk])(
    '%s: writes blocked exactly while frozen, the frozen snapshot is clean',
    async (domain) => {
      await ensureProbeTicking(domain);
      const run = await freezeHoldSnapshotThaw(domain);
      const frozenMs = run.frozenTo - run.frozenFrom;
      const ticks = await ticksAfter(domain, run.outerFrom - 2000, run.outerTo);
      const gaps = longestGapPerDisk(ticks, run.frozenFrom, run.frozenTo);

      for (const disk of disksOf(domain)) {
        const gap = gaps.get(disk);
        expect(gap, disk).toBeDefined();
        console.info(
          `${domain}/${disk}: frozen ${frozenMs} ms (freeze call to thaw return ${run.outerTo - run.outerFrom} ms),` +
            ` probe gap ${gap!.ms.toFixed(0)} ms`,
        );
        expect(gap!.open, disk).toBeUndefined();
        // No write completed while frozen ...
        expect(gap!.ms, `${disk} gap vs frozen ${frozenMs} ms`).toBeGreaterThanOrEqual(frozenMs - STAMP_LAG_MS);
        expect(gap!.startMs).toBeLessThanOrEqual(run.frozenFrom + STAMP_LAG_MS);
        expect(gap!.endMs).toBeGreaterThanOrEqual(run.frozenTo);
        // ... and the gap is the freeze, not something longer.
        expect(gap!.ms).toBeLessThanOrEqual(run.outerTo - run.outerFrom + UPPER_SLACK_MS);

        // The write that ended the gap was the next one in sequence, blocked inside the guest for
        // about the frozen interval (measured on the guest's own clock at both ends).
        const diskTicks = ticks.filter((t) => t.disk === disk);
        const after = diskTicks.find((t) => t.hostMs === gap!.endMs)!;
        const before = diskTicks.find((t) => t.hostMs === gap!.startMs)!;
        expect(after.seq).toBe(before.seq + 1);
        expect(after.guestEndMs - after.guestStartMs).toBeGreaterThanOrEqual(frozenMs - UPPER_SLACK_MS);

        expect(await fsState(domain, disk, run.snaps.get(disk)!)).toBe('clean');
      }
      expect(await agentCommand(env, domain, 'guest-fsfreeze-status')).toBe('thawed');
    },
  );

  it('a snapshot taken under writes without a freeze needs journal recovery', async () => {
    const domain = guests.oneDisk;
    await ensureProbeTicking(domain);
    const name = await snap(domain, 'vdb', 'crash');
    expect(await fsState(domain, 'vdb', name)).toBe('needs_recovery');
  });

  it('the probe reads a whole image that is not ext4 as not-ext4', async () => {
    // snapshotFsState's third answer, on an empty image of the vm pool.
    const image = `lab-probe-blank-${randomBytes(4).toString('hex')}`;
    await rbd(env, ['create', '--size', '4M', `${env.pools.vm}/${image}`]);
    try {
      await rbd(env, ['snap', 'create', `${env.pools.vm}/${image}@s`]);
      const state = await snapshotFsState({
        cephConf: env.ceph.conf,
        id: env.ceph.adminId,
        keyring: env.ceph.adminKeyring,
        pool: env.pools.vm,
        image,
        snap: 's',
      });
      expect(state).toBe('not-ext4');
    } finally {
      await rbd(env, ['snap', 'purge', '--no-progress', `${env.pools.vm}/${image}`]).catch(() => undefined);
      await rbd(env, ['rm', '--no-progress', `${env.pools.vm}/${image}`]);
    }
  });
});
