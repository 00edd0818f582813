import { RadosCluster, type IoCtx } from './cluster';
import { RbdError } from './errors';
import { openImage, type Image } from './image';
import type { FromChild, MirrorState, ReplyValue, SnapOp, SnapRequest, ToChild, WireError } from './snapshotter-protocol';

/*
 * The snapshotter's child process: keeps one cluster connection open and serves snapshot
 * requests from its parent (Snapshotter) over IPC. The parent SIGKILLs it when a request
 * outlives its deadline; with the process, its librados session and any pending lock-break
 * go away. Exits when the parent disconnects.
 *
 * Image handles stay open for `idleCloseMs` after their last use (an 'open' request warms
 * them before a freeze), so a snapshot inside the freeze window costs the snapshot plus ~1 ms
 * of IPC, not an rbd_open.
 */

let cluster: RadosCluster | undefined;
let idleCloseMs = 5000;
const ioctxs = new Map<string, Promise<IoCtx>>();
const images = new Map<string, { image: Promise<Image>; users: number; timer?: NodeJS.Timeout }>();

function send(m: FromChild): void {
  process.send?.(m);
}

function toWire(e: unknown): WireError {
  if (e instanceof RbdError) return { errno: e.errno, call: e.call, message: e.message };
  return { errno: 5, call: 'snapshotter-child', message: e instanceof Error ? e.message : String(e) };
}

function ioctxFor(req: SnapRequest): Promise<IoCtx> {
  const key = `${req.pool}/${req.namespace ?? ''}`;
  let io = ioctxs.get(key);
  if (!io) {
    if (!cluster) return Promise.reject(new Error('not connected'));
    io = cluster.openIoCtx(req.pool, req.namespace ?? '');
    io.catch(() => ioctxs.delete(key));
    ioctxs.set(key, io);
  }
  return io;
}

/** Runs `fn` with a cached handle of the request's image; closes it after idleCloseMs unused. */
async function withImage<T>(req: SnapRequest, fn: (image: Image) => Promise<T>): Promise<T> {
  const key = `${req.pool}/${req.namespace ?? ''}/${req.image}`;
  let entry = images.get(key);
  if (!entry) {
    const image = ioctxFor(req).then((io) => openImage(io, req.image));
    entry = { image, users: 0 };
    images.set(key, entry);
    image.catch(() => images.delete(key));
  }
  const e = entry;
  clearTimeout(e.timer);
  e.users++;
  try {
    return await fn(await e.image);
  } finally {
    if (--e.users === 0) {
      e.timer = setTimeout(() => {
        images.delete(key);
        void e.image.then((i) => i.close()).catch(() => {});
      }, idleCloseMs);
    }
  }
}

function serve(op: SnapOp, req: SnapRequest): Promise<ReplyValue | undefined> {
  if (op === 'ping') return Promise.resolve(true);
  return withImage(req, async (image) => {
    if (op === 'create') await image.createSnap(req.snap);
    else if (op === 'remove') await image.removeSnap(req.snap);
    else if (op === 'exists') return image.snapExists(req.snap);
    else if (op === 'mirror-snap') return image.createMirrorSnap();
    else if (op === 'mirror-state') return mirrorState(image);
    else if (op === 'exclusive-lock') return enableExclusiveLock(image);
    else if (op === 'mirror-enable') await image.enableMirroring('snapshot');
    else if (op === 'mirror-disable') await image.disableMirroring();
    else if (op === 'meta-set') await image.setMetadata(metaOf(req).key, metaOf(req, true).value!);
    else if (op === 'meta-remove') await image.removeMetadata(metaOf(req).key);
    else if (op === 'meta-keys') return Object.keys(await image.listMetadata()).filter((k) => k.startsWith(metaOf(req).key));
    else if (op === 'user-snaps') return (await image.listSnaps()).filter((s) => s.namespace === 'user').map((s) => s.name);
    return undefined;
  });
}

/** A metadata op without its key (or meta-set without its value) is the parent's bug: EINVAL, nothing asked of librbd. */
function metaOf(req: SnapRequest, needsValue = false): { key: string; value?: string } {
  if (!req.meta || (needsValue && req.meta.value === undefined)) throw new RbdError(22, 'snapshotter-child');
  return req.meta;
}

/** RBD_FEATURE_EXCLUSIVE_LOCK. */
const EXCLUSIVE_LOCK = 4n;

/** rbd_get_features, then rbd_update_features when exclusive-lock is missing: true when it was added. */
async function enableExclusiveLock(image: Image): Promise<boolean> {
  if ((await image.features()) & EXCLUSIVE_LOCK) return false;
  await image.updateFeatures(EXCLUSIVE_LOCK, true);
  return true;
}

async function mirrorState(image: Image): Promise<MirrorState> {
  const { state, primary } = await image.getMirrorInfo();
  if (state !== 'enabled') return { state, primary };
  return { state, primary, mode: await image.getMirrorMode() };
}

process.on('message', (m: ToChild) => {
  if (m.type === 'init') {
    idleCloseMs = m.idleCloseMs;
    RadosCluster.connect(m.options).then(
      async (c) => {
        cluster = c;
        send({ type: 'ready', addrs: await c.addrs() });
      },
      (e: unknown) => send({ type: 'fatal', error: toWire(e) }),
    );
    return;
  }
  serve(m.op, m.req).then(
    (value) => send({ type: 'result', id: m.id, ok: true, value }),
    (e: unknown) => send({ type: 'result', id: m.id, ok: false, error: toWire(e) }),
  );
});

// On the parent's disconnect (its close(), or its death) close the images before exiting: a
// process that exits with an image open leaves its header watch behind for ~30 s, and every
// snapshot of that image meanwhile waits on the dead watcher (far past the snapshot bound).
process.on('disconnect', () => {
  setTimeout(() => process.exit(0), 3000).unref();
  void (async () => {
    for (const e of images.values()) {
      clearTimeout(e.timer);
      await e.image.then((i) => i.close()).catch(() => {});
    }
    images.clear();
    for (const io of ioctxs.values()) await io.then((i) => i.close()).catch(() => {});
    await cluster?.shutdown().catch(() => {});
  })().finally(() => process.exit(0));
});
