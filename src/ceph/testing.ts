import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { RadosCluster, type ConnectOptions, type IoCtx } from './cluster';
import { isNotFound } from './errors';
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

function parseEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m) continue;
    out[m[1]!] = m[2]!.trim().replace(/^'(.*)'$/, '$1').replace(/^"(.*)"$/, '$1');
  }
  return out;
}

/**
 * Ceph settings for tests: process.env first (CEPH_CONF, CEPH_ID, CEPH_KEYRING), else the lab's
 * `.lab/env` or `.lab/env.d/*.env` (written by `bash lab/lab.sh up`). Undefined when neither is
 * there, so suites can skip.
 */
export function cephTestEnv(repoRoot = path.resolve(__dirname, '..', '..')): CephTestEnv | undefined {
  let vars: Record<string, string | undefined> = {};
  const lab = path.join(repoRoot, '.lab');
  const files = [path.join(lab, 'env')];
  const envD = path.join(lab, 'env.d');
  if (existsSync(envD)) files.push(...readdirSync(envD).filter((f) => f.endsWith('.env')).map((f) => path.join(envD, f)));
  for (const f of files) if (existsSync(f)) vars = { ...vars, ...parseEnvFile(f) };
  vars = { ...vars, ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('CEPH_') || k.startsWith('VMSNAP_'))) };
  const conf = vars.CEPH_CONF;
  if (!conf || !existsSync(conf)) return undefined;
  return {
    conf,
    id: vars.CEPH_ID ?? 'admin',
    keyring: vars.CEPH_KEYRING,
    connectTimeoutSec: 10,
    vmPool: vars.VMSNAP_VM_POOL ?? vars.CEPH_POOL_VMS ?? 'vms',
    imagePool: vars.VMSNAP_IMAGE_POOL ?? vars.CEPH_POOL_IMAGES ?? 'images',
    otherPool: vars.VMSNAP_OTHER_POOL ?? vars.CEPH_POOL_OTHER ?? 'other',
  };
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
