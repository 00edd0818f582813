import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  RadosCluster, addonHandleCounts, createImage, openImage, removeImage, type Image, type IoCtx,
} from '../../src/ceph';
import { native } from '../../src/ceph/native';
import { cliArgs, injectCloseError, uniqueName } from '../../support/ceph';
import { cephSuite } from '../helpers/ceph-suite';

/*
 * Native handle lifetimes under forced failures: a close that fails, a client fenced by the
 * blocklist, shutdown with images open, handles the garbage collector drops mid-flight, calls
 * racing close. Invariant everywhere: each native resource is released exactly once (the addon's
 * process-wide counts return to where they started), a closed handle answers EBADF, and under
 * `npm run test:asan` nothing reads or frees memory it does not own.
 */

const run = promisify(execFile);
const MiB = 1 << 20;
type Counts = ReturnType<typeof addonHandleCounts>;

/** global.gc: from --expose-gc when node has it, else switched on at run time. */
function exposeGc(): () => void {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (existing) return existing;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
const gc = exposeGc();
const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Collects garbage until the counts equal `want` (finalizers release on addon threads) or time is up. */
async function countsAfterGc(want: Counts, timeoutMs = 30_000): Promise<Counts> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    gc();
    await tick(20);
    const now = addonHandleCounts();
    if (JSON.stringify(now) === JSON.stringify(want) || Date.now() > until) return now;
  }
}

const plus = (base: Counts, d: Partial<Counts>): Counts => ({
  clusters: base.clusters + (d.clusters ?? 0),
  ioctxs: base.ioctxs + (d.ioctxs ?? 0),
  images: base.images + (d.images ?? 0),
});

describe('native handle lifetimes under forced failures', () => {
  const t = cephSuite();
  const { cleanups } = t;
  let name: string;
  let base: Counts;
  beforeAll(async () => {
    name = uniqueName('img');
    await createImage(t.io, name, 8 * MiB, { order: 20 });
    cleanups.defer(`image ${name}`, () => removeImage(t.io, name));
  });

  /** A connection of its own plus an ioctx on the suite's namespace. */
  async function ownConnection(): Promise<{ c: RadosCluster; io: IoCtx }> {
    base = addonHandleCounts();
    const c = await RadosCluster.connect(t.env);
    const io = await c.openIoCtx(t.io.pool, t.io.namespace);
    return { c, io };
  }

  /** Opens an image, makes its close fail, checks the handle is gone; returns a weak reference. */
  async function failClose(io: IoCtx): Promise<WeakRef<Image>> {
    const img = await openImage(io, name);
    injectCloseError(5);
    expect(await img.close().catch((e: unknown) => e)).toMatchObject({ errno: 5, code: 'EIO', call: 'rbd_close' });
    // librbd freed the image whatever rbd_close returned: nothing may reach it again.
    expect(await img.stat().catch((e: unknown) => e)).toMatchObject({ errno: 9, call: 'rbd_stat' });
    expect(await native().closeImage(img.handle).catch((e: unknown) => e)).toMatchObject({ errno: 9, call: 'rbd_close' });
    return new WeakRef(img);
  }

  it('a failed rbd_close still ends the handle: EBADF after, GC closes nothing twice, shutdown counts the other image', async () => {
    const { c, io } = await ownConnection();
    const other = await openImage(io, name);
    const failed = await failClose(io);
    const open = plus(base, { clusters: 1, ioctxs: 1, images: 1 });
    expect(addonHandleCounts()).toEqual(open);

    // Give its finalizer every chance to run (V8 decides when the object is collectable).
    for (const until = Date.now() + 5_000; failed.deref() && Date.now() < until; ) {
      gc();
      await tick(20);
    }
    expect(await countsAfterGc(open, 500)).toEqual(open); // a finalizer closed nothing twice

    await io.close();
    expect(await c.shutdown().catch((e: unknown) => e)).toMatchObject({ errno: 16, call: 'rados_shutdown' });
    expect(await other.stat()).toMatchObject({ size: 8 * MiB });
    await other.close();
    await c.shutdown();
    expect(addonHandleCounts()).toEqual(base);
  });

  it('closes an image after its client was blocklisted (ceph osd blocklist add), and shuts down', async () => {
    const { c, io } = await ownConnection();
    const img = await openImage(io, name);
    await img.write(0, Buffer.from('held')); // takes the exclusive lock
    const addr = await c.addrs();
    await run('ceph', [...cliArgs(t.env), 'osd', 'blocklist', 'add', addr, '600']);
    cleanups.defer(`blocklist ${addr}`, () => run('ceph', [...cliArgs(t.env), 'osd', 'blocklist', 'rm', addr]));
    // Fenced once the client has the new OSD map: writes fail ESHUTDOWN (108).
    let fenced: unknown;
    for (const until = Date.now() + 30_000; Date.now() < until; await tick(100)) {
      fenced = await img.write(0, Buffer.from('late')).catch((e: unknown) => e);
      if (typeof fenced === 'object') break;
    }
    expect(fenced).toMatchObject({ errno: 108, call: 'rbd_write2' });

    // librbd 16.2.15 closes a fenced image without error (measured); an error would be surfaced
    // here and the handle would be gone all the same.
    const closed = await img.close().then(() => 'closed', (e: unknown) => e);
    expect(closed === 'closed' || (closed as { call?: string }).call === 'rbd_close').toBe(true);
    expect(await img.stat().catch((e: unknown) => e)).toMatchObject({ errno: 9 });
    await io.close();
    await c.shutdown();
    expect(addonHandleCounts()).toEqual(base);
  });

  it('shutdown with open images: EBUSY until the last image closes; a dropped cluster lives while its images do', async () => {
    const { c, io } = await ownConnection();
    const img = await openImage(io, name, { readOnly: true });
    await io.close(); // the image keeps its own ioctx (librbd duplicates it)
    expect(await c.shutdown().catch((e: unknown) => e)).toMatchObject({ errno: 16 });
    expect((await img.read(0, 4)).length).toBe(4);
    await img.close();
    await c.shutdown();
    expect(await c.fsid().catch((e: unknown) => e)).toMatchObject({ errno: 9 });
    expect(addonHandleCounts()).toEqual(base);

    // Shutdown racing an ioctx being opened: the open wins, shutdown reports EBUSY, all stays usable.
    const c2 = await RadosCluster.connect(t.env);
    const opening = c2.openIoCtx(t.io.pool, t.io.namespace);
    const early = await c2.shutdown().catch((e: unknown) => e);
    const io2 = await opening;
    expect(early).toMatchObject({ errno: 16, call: 'rados_shutdown' });
    expect(await c2.fsid()).toMatch(/^[0-9a-f-]{36}$/);
    await io2.close();
    await c2.shutdown();
    expect(addonHandleCounts()).toEqual(base);

    // The cluster object dropped while an image is open: the connection stays up for the image
    // and shuts down (on an addon thread) once the image is closed.
    const survivor = await openThroughDroppedCluster();
    const open = plus(base, { clusters: 1, images: 1 });
    expect(await countsAfterGc(open, 500)).toEqual(open);
    expect((await survivor.read(0, 4)).length).toBe(4);
    await survivor.close();
    expect(await countsAfterGc(base)).toEqual(base);
  });

  /** An image whose cluster and ioctx objects are out of reach once this returns. */
  async function openThroughDroppedCluster(): Promise<Image> {
    const c = await RadosCluster.connect(t.env);
    const io = await c.openIoCtx(t.io.pool, t.io.namespace);
    const img = await openImage(io, name, { readOnly: true });
    await io.close();
    return img;
  }

  it('1,000 concurrent open/close under GC pressure: every image released exactly once', async () => {
    const { c, io } = await ownConnection();
    let pressing = true;
    const pressure = (async () => {
      while (pressing) {
        gc();
        await tick(1);
      }
    })();
    const t0 = performance.now();
    const outcomes = await Promise.all(
      Array.from({ length: 1000 }, async (_, i) => {
        const img = await openImage(io, name, { readOnly: i % 10 !== 0 });
        const stat = img.stat();
        if (i % 3 === 0) return (await stat).size; // dropped without close: the finalizer closes it
        const closing = img.close(); // races the stat: close waits for it
        const size = (await stat).size;
        await closing;
        return size;
      }),
    );
    pressing = false;
    await pressure;
    expect(outcomes.every((s) => s === 8 * MiB)).toBe(true);
    const after = await countsAfterGc(plus(base, { clusters: 1, ioctxs: 1 }));
    console.log(`[ceph-handle-lifetime] 1,000 concurrent opens (1/3 left to GC) in ${(performance.now() - t0).toFixed(0)} ms`);
    expect(after).toEqual(plus(base, { clusters: 1, ioctxs: 1 }));
    await io.close();
    await c.shutdown();
    expect(addonHandleCounts()).toEqual(base);
  });

  it('calls racing close: those before it complete, those after it get EBADF, nothing runs on a freed image', async () => {
    const { c, io } = await ownConnection();
    const img = await openImage(io, name);
    const before = [img.stat(), img.read(0, 4096), img.listMetadata(), img.checksum(), img.listSnaps(), img.features()];
    const closing = img.close();
    const after = Promise.allSettled([img.stat(), img.read(0, 1), img.getMetadata('k'), img.checksum()]);
    const settledBefore = await Promise.allSettled(before);
    expect(settledBefore.map((s) => s.status)).toEqual(before.map(() => 'fulfilled'));
    await closing;
    for (const a of await after) {
      expect(a).toMatchObject({ status: 'rejected', reason: { errno: 9 } });
    }

    // An ioctx closed while an image is being opened through it: the open completes first.
    const opening = openImage(io, name, { readOnly: true });
    const ioClosing = io.close();
    const opened = await opening;
    await ioClosing;
    expect(await openImage(io, name).catch((e: unknown) => e)).toMatchObject({ errno: 9 });
    expect((await opened.read(0, 4)).length).toBe(4);
    await opened.close();
    await c.shutdown();
    expect(addonHandleCounts()).toEqual(base);
  });
});
