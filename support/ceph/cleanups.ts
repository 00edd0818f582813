/*
 * go-ceph style `(resource, cleanup)` registration that tears down in reverse (dependency) order.
 */
import { RadosCluster, type IoCtx } from '../../src/ceph/cluster';
import { isNotFound } from '../../src/ceph/errors';
import { createNamespace, removeNamespace } from '../../src/ceph/namespace';
import { uniqueName } from './unique-name';
import type { CephTestEnv } from './env';

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
