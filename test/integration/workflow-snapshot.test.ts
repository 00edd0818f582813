import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import type { SnapshotRequest } from '../../src/model/input';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { CephView } from '../helpers/ceph-inspect';
import { ensureThawed, freezeStatus } from '../helpers/guest';
import { need } from '../../support/lab/env';
import { longestGap, readTicks, snapshotFsState } from '../../support/lab/probe';
import { failureOf } from '../helpers/failure-of';

let h: Harness;
let ceph: CephView;
let g1: string;
let g3: string;
let noagent: string;
const IMAGES = 'images';

beforeAll(async () => {
  h = await startHarness();
  ceph = new CephView(h.vars);
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
  g3 = need(h.vars, 'VMSNAP_GUEST_3DISK');
  noagent = need(h.vars, 'VMSNAP_GUEST_NOAGENT');
});

afterAll(async () => {
  for (const g of [g1, g3]) if (g) await ensureThawed(h.vars, g);
  await h?.stop();
});

async function run(request: SnapshotRequest, workflowId = uniqueId('t')): Promise<SnapshotResult> {
  return h.client.workflow.execute('consistentSnapshot', { taskQueue: h.hw.taskQueue, workflowId, args: [request] });
}

function fsRef(pool: string, image: string, snap: string) {
  return { cephConf: need(h.vars, 'CEPH_CONF'), id: 'admin', keyring: need(h.vars, 'CEPH_KEYRING'), pool, image, snap };
}

async function sourceImages(domain: string): Promise<string[]> {
  return (await ceph.images('vms')).filter((i) => i.startsWith(`${domain}-`));
}

/** Snapshots a run left on the domain's source images (its names derive from its workflow id). */
async function strays(domain: string, workflowId?: string): Promise<string[]> {
  const out: string[] = [];
  for (const img of await sourceImages(domain)) {
    for (const s of await ceph.vmsnapSnaps('vms', img)) if (!workflowId || s === `vmsnap-${workflowId}`) out.push(`vms/${img}@${s}`);
  }
  return out;
}

async function cleanupImages(result: SnapshotResult): Promise<void> {
  for (const d of result.disks) if (d.image) await ceph.removeImage(d.image.split('/')[0], d.image.split('/')[1]);
}

describe('consistentSnapshot on the lab', () => {
  it.each([
    ['1-disk', () => g1, 1],
    ['3-disk', () => g3, 3],
  ])('%s guest: frozen only around the snapshot, clean images equal to the frozen snapshot', async (_n, guest, disks) => {
    const domain = guest();
    const since = Date.now();
    const id = uniqueId(`happy-${disks}`);
    const result = await run({ domain, quiesce: 'require', verify: true }, id);
    const until = Date.now();

    expect(result.quiesced).toBe(true);
    expect(result.frozenFilesystems).toBe(disks);
    expect(result.disks).toHaveLength(disks);
    expect(result.freezeWindowMs).toBeGreaterThan(0);
    expect(result.freezeWindowMs).toBeLessThan(5000);
    expect(await freezeStatus(h.vars, domain)).toBe('thawed');

    // The guest's own writer saw one stall about as long as the worker's window — not the flatten.
    const ticks = await readTicks(domain, since - 1000);
    const gap = longestGap(ticks, since, until);
    expect(gap).toBeDefined();
    expect(gap!.ms).toBeLessThan(result.freezeWindowMs! + 1500);
    // ...and that stall is real: writes were blocked at least while the snapshot was being taken.
    expect(gap!.ms).toBeGreaterThan(result.freezeBreakdownMs!.snapshot - 150);

    for (const d of result.disks) {
      const [pool, image] = d.image!.split('/');
      expect(pool).toBe(IMAGES);
      const info = await ceph.info(pool, image);
      expect(info.parent).toBeUndefined();
      expect(await ceph.snaps(pool, image)).toEqual(['snap']);
      const meta = await ceph.meta(pool, image);
      expect(meta['vmsnap.workflow-id']).toBe(id);
      expect(meta['vmsnap.state']).toBe('complete');
      expect(await snapshotFsState(fsRef(pool, image, 'snap'))).toBe('clean');
      // Content equals the frozen snapshot byte for byte (checked by the run before dropping it)
      // and, independently, the image's own export hashes to the same digest.
      expect(d.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(await ceph.sha256(`${pool}/${image}@snap`)).toBe(d.sha256);
      expect(d.location).toMatch(new RegExp(`^rbd://[0-9a-f-]{36}/${pool}/${image}/snap$`));
    }
    expect(await strays(domain, id)).toEqual([]);
    await cleanupImages(result);
  });

  it('require on a guest without an agent fails typed, freezes nothing, creates nothing', async () => {
    const before = await ceph.images(IMAGES);
    const f = await failureOf(run({ domain: noagent, quiesce: 'require' }));
    expect(f.type).toBe('QuiesceUnavailable');
    expect(f.message).toMatch(/agent/);
    expect(await ceph.images(IMAGES)).toEqual(before);
    expect(await strays(noagent)).toEqual([]);
  });

  it('prefer on a guest without an agent succeeds and says quiesced: false, and why', async () => {
    const result = await run({ domain: noagent });
    expect(result.quiesced).toBe(false);
    expect(result.quiesceReason).toMatch(/no guest agent channel/);
    expect(result.freezeWindowMs).toBeNull();
    expect(await ceph.meta(IMAGES, result.disks[0].image!.split('/')[1])).toMatchObject({ 'vmsnap.quiesced': 'false' });
    await cleanupImages(result);
  });

  it('re-running a completed workflow id creates nothing new', async () => {
    const id = uniqueId('rerun');
    const first = await run({ domain: g1, target: { clone: true } }, id);
    const imagesAfterFirst = await ceph.images(IMAGES);
    const second = await run({ domain: g1 }, id);
    expect(second.reusedExisting).toBe(true);
    expect(second.disks.map((d) => d.image)).toEqual(first.disks.map((d) => d.image));
    expect(await ceph.images(IMAGES)).toEqual(imagesAfterFirst);
    await cleanupImages(first);
  });

  it('re-running after a failure completes the work', async () => {
    const id = uniqueId('retry');
    const image = `blocker-${id}`;
    // Something vmsnap does not own sits on the target name: the run must fail and not touch it.
    await ceph.rbd('create', '--size', '4M', `${IMAGES}/${image}`);
    const f = await failureOf(run({ domain: g1, target: { images: { vdb: image } } }, id));
    expect(f.type).toBe('NameConflict');
    expect(await ceph.images(IMAGES)).toContain(image);
    expect(await ceph.meta(IMAGES, image)).toEqual({});
    await ceph.removeImage(IMAGES, image);
    const result = await run({ domain: g1, target: { images: { vdb: image } } }, id);
    expect(result.disks[0].image).toBe(`${IMAGES}/${image}`);
    expect(await strays(g1, id)).toEqual([]);
    await cleanupImages(result);
  });

  it('snapshot-only mode keeps the RBD snapshot on the source image and no clone', async () => {
    const id = uniqueId('snaponly');
    const before = await ceph.images(IMAGES);
    const result = await run({ domain: g1, target: { clone: false } }, id);
    expect(result.quiesced).toBe(true);
    const [pool, image] = result.disks[0].source.split('/');
    const snap = result.disks[0].snapshot.split('@')[1];
    expect(await ceph.snaps(pool, image)).toContain(snap);
    expect(await snapshotFsState(fsRef(pool, image, snap))).toBe('clean');
    expect(await ceph.images(IMAGES)).toEqual(before);
    await ceph.rbd('snap', 'rm', `${pool}/${image}@${snap}`);
    await ceph.rbd('image-meta', 'remove', `${pool}/${image}`, `vmsnap.done.${snap}`).catch(() => undefined);
    await ceph.rbd('image-meta', 'remove', `${pool}/${image}`, `vmsnap.snap-owner.${snap}`).catch(() => undefined);
  });

  it('a second concurrent snapshot of the same VM is refused while the first runs', async () => {
    // The first run is held 6 s after its freeze (fault point freeze:after; deadline 10 s), so it
    // still runs when the second has asked the lock to check its holder (a contender waits up to
    // 3 s for a closed holder to let go).
    const faultDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-busy-'));
    Object.assign(process.env, { VMSNAP_FAULT_POINTS: 'freeze:after', VMSNAP_FAULT_DIR: faultDir, VMSNAP_FAULT_PAUSE_MS: '6000' });
    const first = h.client.workflow.start('consistentSnapshot', {
      taskQueue: h.hw.taskQueue,
      workflowId: uniqueId('busy-a'),
      args: [{ domain: g1 }],
    });
    const handle = await first;
    try {
      for (let i = 0; i < 600 && !existsSync(path.join(faultDir, 'freeze_after')); i++) await new Promise((r) => setTimeout(r, 100));
      delete process.env.VMSNAP_FAULT_POINTS;
      const f = await failureOf(run({ domain: g1 }, uniqueId('busy-b')));
      expect(f.type).toBe('DomainBusy');
      expect(f.message).toMatch(/in progress/);
    } finally {
      for (const k of ['VMSNAP_FAULT_POINTS', 'VMSNAP_FAULT_DIR', 'VMSNAP_FAULT_PAUSE_MS']) delete process.env[k];
    }
    const result = (await handle.result()) as SnapshotResult;
    expect(result.quiesced).toBe(true);
    await cleanupImages(result);
  });
});
