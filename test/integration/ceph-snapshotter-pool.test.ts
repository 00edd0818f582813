import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SnapshotterPool, createImage, isBusy, openImage, removeImage, type IoCtx, type RadosCluster, type SnapRequest } from '../../src/ceph';
import { Cleanups, cephTestEnv, testCluster, testNamespace, uniqueName } from '../../support/ceph';
import { blocklist, holderWrite, startHolder, stopHolder } from '../helpers/lock-holder';

/*
 * Isolation between VMs in the snapshotter: two images, each with its own lock owner (a holder
 * process standing in for a VM's QEMU). Owner A is SIGSTOPped; A's bounded snapshot times out
 * and A's child is killed — B's child is not, and B's snapshots keep their usual latency while
 * it happens. The eviction of A's dead session hangs forever here (a blocklist command facing a
 * lost monitor quorum): A's next call still returns within its own bound, B never waits for it.
 */

const env = cephTestEnv();
const MiB = 1 << 20;

describe('snapshotter pool: one child per VM in flight', () => {
  const cleanups = new Cleanups();
  let cluster: RadosCluster;
  let io: IoCtx;
  let dir: string;

  beforeAll(async () => {
    cluster = await testCluster(cleanups, env!);
    io = await testNamespace(cleanups, cluster, env!.vmPool);
    dir = mkdtempSync(path.join(tmpdir(), 'vmsnap-pool-'));
    cleanups.defer('tmpdir', () => rm(dir, { recursive: true }));
  });
  afterAll(() => cleanups.run());

  async function newImage(): Promise<string> {
    const name = uniqueName('disk');
    await createImage(io, name, 8 * MiB);
    cleanups.defer(`image ${name}`, async () => {
      const img = await openImage(io, name);
      for (const s of await img.listSnaps()) await img.removeSnap(s.name);
      await img.close();
      // A's killed child was never fenced here (the eviction hangs): its watch lasts ~30 s.
      for (let t0 = Date.now(); ; ) {
        try {
          return await removeImage(io, name);
        } catch (e) {
          if (!isBusy(e) || Date.now() - t0 > 60_000) throw e;
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
    });
    return name;
  }

  const req = (image: string, snap: string): SnapRequest => ({ pool: io.pool, namespace: io.namespace, image, snap });

  it("a hung lock owner costs only its own VM's child; a hanging eviction wedges nothing", async () => {
    const [a, b] = [await newImage(), await newImage()];
    const hangingEvict = { addToBlocklist: () => new Promise<void>(() => {}) } as unknown as RadosCluster;
    const pool = await cleanups.add(new SnapshotterPool({ ...env!, idleCloseMs: 500, laneIdleMs: 120_000, evictWith: hangingEvict }), (p) => p.close(), 'pool');
    const holderA = await startHolder(dir, env!, io, a);
    cleanups.defer('holder A', () => stopHolder(holderA.proc));
    const holderB = await startHolder(dir, env!, io, b);
    cleanups.defer('holder B', () => stopHolder(holderB.proc));
    await pool.start();

    // Warm both lanes; measure B's usual snapshot latency.
    await pool.prepare([req(a, '')], { timeoutMs: 10_000 });
    await pool.prepare([req(b, '')], { timeoutMs: 10_000 });
    const usual: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      expect((await pool.createSnaps([req(b, `usual${i}`)], { timeoutMs: 5000 })).created).toHaveLength(1);
      usual.push(performance.now() - t0);
    }
    expect((await pool.createSnaps([req(a, 'a0')], { timeoutMs: 5000 })).created).toHaveLength(1);
    expect(pool.laneKeys).toHaveLength(2);
    const [aPid, bPid] = [pool.lanePid([req(a, '')]), pool.lanePid([req(b, '')])];
    expect(aPid).toBeDefined();
    expect(bPid).toBeDefined();

    holderA.proc.kill('SIGSTOP');
    let bDuring: number[];
    try {
      const t0 = performance.now();
      const hung = pool.createSnaps([req(a, 'late')], { timeoutMs: 3000 });
      // B snapshots back to back while A's call hangs and A's child is killed at 3 s.
      const bLoop = (async () => {
        const times: number[] = [];
        let i = 0;
        while (performance.now() - t0 < 4500) {
          const t = performance.now();
          const r = await pool.createSnaps([req(b, `during${i++}`)], { timeoutMs: 5000 });
          expect(r.created, `B snapshot ${i} during A's hang: ${JSON.stringify(r)}`).toHaveLength(1);
          times.push(performance.now() - t);
        }
        return times;
      })();
      const r = await hung;
      expect(r).toMatchObject({ created: [], timedOut: true, mayCompleteLate: [req(a, 'late')] });
      expect(performance.now() - t0).toBeLessThan(4000);
      bDuring = await bLoop;
      // The eviction of A's dead child never finishes: A's next call returns within its own bound.
      const t1 = performance.now();
      await expect(pool.snapExists(req(a, 'a0'), { timeoutMs: 1500 })).rejects.toMatchObject({ errno: 110 });
      expect(performance.now() - t1).toBeLessThan(2500);
    } finally {
      holderA.proc.kill('SIGCONT');
    }
    // B's child is the one it had before A's hang: never killed. A's was.
    expect(pool.lanePid([req(b, '')])).toBe(bPid);
    expect(pool.lanePid([req(a, '')])).not.toBe(aPid);
    const worstDuring = Math.max(...bDuring);
    const usualMedian = [...usual].sort((x, y) => x - y)[1]!;
    console.log(
      `[snapshotter-pool] B snapshot usual median ${usualMedian.toFixed(0)} ms; during A's hang: ${bDuring.length} snapshots, worst ${worstDuring.toFixed(0)} ms`,
    );
    expect(bDuring.length).toBeGreaterThanOrEqual(2);
    expect(worstDuring).toBeLessThan(Math.max(3 * usualMedian, usualMedian + 1500));
    // Neither owner was blocklisted: A's lock was never broken.
    expect((await holderWrite(holderA.proc, 60_000)) as { ok: boolean }).toMatchObject({ ok: true });
    expect(blocklist(env!)).not.toContain(holderA.addrs);
    expect(blocklist(env!)).not.toContain(holderB.addrs);
  });

  it('past maxLanes a new lane closes the least recently used idle one: children stay near the lanes in use', async () => {
    const images = [await newImage(), await newImage(), await newImage(), await newImage()];
    const pool = await cleanups.add(new SnapshotterPool({ ...env!, laneIdleMs: 120_000, maxLanes: 2 }), (p) => p.close(), 'capped pool');
    await pool.start();
    for (const [i, image] of images.entries()) expect((await pool.createSnaps([req(image, `cap${i}`)], { timeoutMs: 10_000 })).created).toHaveLength(1);
    // The two most recent lanes stay (with warm handles); the older two were closed, not kept 120 s.
    expect(pool.laneKeys).toEqual(images.slice(2).map((i) => `${io.pool}/${io.namespace ?? ''}/${i}`));
    await until(async () => pool.pids.length <= 3, 10_000);
    // A lane with a call in flight is never closed: three VMs at once on a pool of two get three.
    const more = [await newImage(), await newImage(), await newImage()];
    const all = await Promise.all(more.map((image) => pool.createSnaps([req(image, 'busy')], { timeoutMs: 10_000 })));
    expect(all.map((r) => r.created.length)).toEqual([1, 1, 1]);
    expect(pool.laneKeys).toHaveLength(3);
  });
});

async function until(ok: () => Promise<boolean>, ms: number): Promise<void> {
  const t0 = Date.now();
  while (!(await ok())) {
    if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
