import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { LabNotUpError, loadLabEnv, type LabEnv } from '../lab/env';
import { RadosCluster, type ConnectOptions, type IoCtx } from './cluster';
import { isNotFound } from './errors';
import { native } from './native';
import { createNamespace, removeNamespace } from './namespace';

/*
 * Test support for code that talks to the lab's Ceph: connection settings, and go-ceph style
 * `(resource, cleanup)` registration that tears down in reverse (dependency) order.
 */

export interface CephTestEnv extends ConnectOptions {
  id: string;
  vmPool: string;
  imagePool: string;
  otherPool: string;
}

/**
 * Ceph settings for tests: CEPH_CONF/CEPH_ID/CEPH_KEYRING from process.env when set (e.g.
 * CEPH_ID=vmsnap CEPH_KEYRING=... to run as the restricted client), else the lab's env file via
 * loadLabEnv(). Undefined when neither is there, so suites can skip.
 */
export function cephTestEnv(): CephTestEnv {
  let lab: LabEnv | undefined;
  try {
    lab = loadLabEnv();
  } catch (e) {
    if (!(e instanceof LabNotUpError)) throw e;
  }
  const conf = process.env.CEPH_CONF ?? lab?.ceph.conf;
  // Never a silent skip: a Ceph test without a cluster is a failure that says what to do.
  if (!conf || !existsSync(conf)) throw new Error('no Ceph cluster: run `npm run lab:up` (or set CEPH_CONF)');
  const fromEnv = process.env.CEPH_ID !== undefined;
  return {
    conf,
    id: process.env.CEPH_ID ?? lab?.ceph.adminId ?? 'admin',
    keyring: fromEnv ? process.env.CEPH_KEYRING : (process.env.CEPH_KEYRING ?? lab?.ceph.adminKeyring),
    connectTimeoutSec: 10,
    vmPool: process.env.VMSNAP_VM_POOL ?? lab?.pools.vm ?? 'vms',
    imagePool: process.env.VMSNAP_IMAGE_POOL ?? lab?.pools.image ?? 'images',
    otherPool: process.env.VMSNAP_OTHER_POOL ?? lab?.pools.other ?? 'other',
  };
}

/**
 * Makes the addon's next rbd_close report `errno` after it really closed the image: librbd 16's
 * own close errors are rare and timing-bound (a blocklisted client's close returned 0 in every
 * probe), and what must hold after one (handle gone, nothing closed twice) needs it on demand.
 */
export function injectCloseError(errno: number): void {
  native().injectCloseError(errno);
}

/** Arguments for the `rbd`/`ceph` CLIs matching the env. */
export function cliArgs(env: CephTestEnv): string[] {
  return ['-c', env.conf, '--id', env.id, ...(env.keyring ? ['--keyring', env.keyring] : [])];
}

export function uniqueName(prefix = 't'): string {
  return `${prefix}-${randomUUID()}`;
}

/** Cleanup stack: `add(resource, cleanup)` returns the resource; `run()` tears down last-in first-out. */
export class Cleanups {
  private readonly stack: { label: string; fn: () => Promise<void> }[] = [];

  async add<T>(resource: T | Promise<T>, cleanup: (r: T) => Promise<unknown>, label = 'resource'): Promise<T> {
    const r = await resource;
    this.stack.push({ label, fn: async () => void (await cleanup(r)) });
    return r;
  }

  /** Registers a cleanup without a resource (e.g. after a create call that returns nothing). */
  defer(label: string, fn: () => Promise<unknown>): void {
    this.stack.push({ label, fn: async () => void (await fn()) });
  }

  /** Runs every cleanup (newest first); ENOENT counts as already gone; other errors are thrown together. */
  async run(): Promise<void> {
    const errors: unknown[] = [];
    for (let c = this.stack.pop(); c; c = this.stack.pop()) {
      try {
        await c.fn();
      } catch (e) {
        if (!isNotFound(e)) errors.push(new Error(`cleanup ${c.label}: ${String(e)}`, { cause: e }));
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, `${errors.length} cleanup(s) failed`);
  }
}

/** A connection plus a fresh UUID-named rbd namespace in `pool`, cleaned up by `cleanups`. */
export async function testNamespace(
  cleanups: Cleanups,
  cluster: RadosCluster,
  pool: string,
  name = uniqueName('ns'),
): Promise<IoCtx> {
  const root = await cleanups.add(cluster.openIoCtx(pool), (io) => io.close(), `ioctx ${pool}`);
  await createNamespace(root, name);
  cleanups.defer(`namespace ${pool}/${name}`, () => removeNamespace(root, name));
  return cleanups.add(cluster.openIoCtx(pool, name), (io) => io.close(), `ioctx ${pool}/${name}`);
}

/** Connects with the env's settings; shutdown registered with `cleanups`. */
export function testCluster(cleanups: Cleanups, env: CephTestEnv): Promise<RadosCluster> {
  return cleanups.add(RadosCluster.connect(env), (c) => c.shutdown(), 'cluster');
}

/** Writes `bytes` of deterministic, non-repeating data from offset 0, in 4 MiB writes. */
export async function fillImage(image: { write(o: number, b: Buffer): Promise<number> }, bytes: number, seed = 1): Promise<void> {
  const chunk = 4 << 20;
  for (let off = 0; off < bytes; off += chunk) {
    const len = Math.min(chunk, bytes - off);
    const buf = Buffer.alloc(len + 4);
    for (let i = 0; i < len; i += 4) buf.writeUInt32LE(((off + i) * 2654435761 + seed) >>> 0, i);
    await image.write(off, buf.subarray(0, len));
  }
}
