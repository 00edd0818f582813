import { imageUsers, isNotEmpty, isNotFound, listImages, readImageIfExists, removeImage } from '../ceph';
import type { ImageUsers, ImageUsersOptions, IoCtx } from '../ceph';
import type { LibvirtClient } from '../libvirt';
import { parseDomainXml } from '../libvirt';
import { restoreIdsOf, restoreLeftoverAction } from '../model/restore-leftovers';
import type { RunStatus } from '../model/restore-leftovers';
import type { RunScope } from '../model/identity';
import { RESTORE_META } from '../model/restore-point';

export interface RestoreReapOptions {
  scope: RunScope;
  /** This worker's host id: it reaps only the disks its own host made or replaced. */
  host: string;
  keepReplacedMs: number;
  ioctx: (pool: string, namespace?: string) => Promise<IoCtx>;
  statusOf: (workflowId: string) => Promise<RunStatus>;
  /** How the `rbd` CLI connects (watchers, lock owners); bounded per call. */
  cli: ImageUsersOptions;
  /** The pool calls, replaceable in tests; default: librbd and the `rbd` CLI. */
  pool?: ReapPool;
}

/** The four pool operations the restore reaper makes. */
export interface ReapPool {
  list(pool: string, ns: string): Promise<string[]>;
  metadata(pool: string, ns: string, name: string): Promise<Record<string, string> | null>;
  users(spec: string): Promise<ImageUsers>;
  /** rbd_remove; resolves with why it was refused, or undefined once removed (or gone). */
  remove(pool: string, ns: string, name: string): Promise<string | undefined>;
}

export interface RestoreReapReport {
  removed: string[];
  /** Leftovers the reaper would remove but could not (snapshots or clones of their own, open). */
  kept: { disk: string; reason: string }[];
}

/** A removal on a disk nobody has open is fast; past this it is cancelled, not waited on. */
const REMOVE_BOUND_MS = 60_000;

/**
 * The restore half of the orphan reaper (decisions in src/model/restore-leftovers.ts): in every
 * pool a domain defined on this host has an RBD disk in, it removes the disks of restores that
 * ended without completing and the disks completed in-place restores replaced once they are
 * `keepReplacedMs` old — only those this host made or replaced (every host reaps the shared
 * pools, but each sees only its own domains). The set of disks in use is read from every defined
 * domain's inactive and, when running, live XML just before the pools are listed; then, right
 * before a removal, Ceph itself is asked whether anyone has the disk open (watchers) or holds its
 * lock (the exclusive-lock owner): any → kept, as is a disk whose users cannot be read. Nothing
 * here breaks a lock: the checks open the image read-only and librbd refuses to remove an image
 * with a watcher.
 */
export async function reapRestoreLeftovers(lv: LibvirtClient, o: RestoreReapOptions): Promise<RestoreReapReport> {
  const pool = o.pool ?? cephPool(o);
  const inUse = await disksInUse(lv);
  const out: RestoreReapReport = { removed: [], kept: [] };
  for (const [poolName, namespaces] of poolsOf(inUse)) {
    for (const ns of namespaces) {
      for (const name of await pool.list(poolName, ns)) {
        const spec = ns ? `${poolName}/${ns}/${name}` : `${poolName}/${name}`;
        const meta = await pool.metadata(poolName, ns, name);
        if (!meta || !(RESTORE_META.workflowId in meta || RESTORE_META.replacedBy in meta)) continue;
        const statuses = new Map<string, RunStatus>();
        for (const id of Object.values(restoreIdsOf(meta))) statuses.set(id, await o.statusOf(id));
        const decision = restoreLeftoverAction(meta, {
          scope: o.scope,
          host: o.host,
          now: Date.now(),
          keepReplacedMs: o.keepReplacedMs,
          inUse: inUse.has(spec),
          statusOf: (id) => statuses.get(id) ?? 'UNKNOWN',
        });
        if (decision.action === 'leave') continue;
        const why = decision.action === 'remove-clone' ? `restore ${decision.workflowId} ${decision.status}` : `replaced by ${decision.workflowId} at ${decision.replacedAt}`;
        const open = await openBy(pool, spec);
        const refused = open ?? (await pool.remove(poolName, ns, name));
        if (refused) out.kept.push({ disk: spec, reason: `${why}; ${refused}` });
        else out.removed.push(`${spec} (${why})`);
      }
    }
  }
  return out;
}

/** Why the disk must stay because Ceph says someone has it (or cannot say): undefined when nobody does. */
async function openBy(pool: ReapPool, spec: string): Promise<string | undefined> {
  let users: ImageUsers;
  try {
    users = await pool.users(spec);
  } catch (err) {
    return `kept: cannot tell who has it open (${(err as Error).message})`;
  }
  if (users.watchers.length) return `kept: open by ${users.watchers.join(', ')} (watchers)`;
  if (users.lockers.length) return `kept: locked by ${users.lockers.join(', ')}`;
  return undefined;
}

function cephPool(o: RestoreReapOptions): ReapPool {
  const io = (pool: string, ns: string) => o.ioctx(pool, ns || undefined);
  return {
    list: async (pool, ns) => listImages(await io(pool, ns)),
    metadata: async (pool, ns, name) => readImageIfExists(await io(pool, ns), name, (img) => img.listMetadata()),
    users: (spec) => imageUsers(o.cli, spec),
    remove: async (pool, ns, name) => removeIfUnused(await io(pool, ns), name),
  };
}

/** `pool/image` (or `pool/namespace/image`) of every RBD disk of every domain defined on this host. */
async function disksInUse(lv: LibvirtClient): Promise<Set<string>> {
  const out = new Set<string>();
  for (const dom of await lv.listDomains({ which: 'defined' })) {
    const xmls = [await lv.getDomainXml(dom, { inactive: true })];
    // A running domain may use a disk its persistent definition no longer names (hot-plug, a redefine).
    if ((await lv.getDomainState(dom)).state !== 'shutoff') xmls.push(await lv.getDomainXml(dom));
    for (const xml of xmls) {
      for (const d of parseDomainXml(xml).disks) {
        if (d.rbd) out.add(d.rbd.namespace ? `${d.rbd.pool}/${d.rbd.namespace}/${d.rbd.image}` : `${d.rbd.pool}/${d.rbd.image}`);
      }
    }
  }
  return out;
}

function poolsOf(specs: Set<string>): Map<string, Set<string>> {
  const pools = new Map<string, Set<string>>();
  for (const spec of specs) {
    const parts = spec.split('/');
    const ns = parts.length > 2 ? parts.slice(1, -1).join('/') : '';
    pools.set(parts[0], (pools.get(parts[0]) ?? new Set()).add(ns));
  }
  return pools;
}

/** rbd_remove, which refuses an image with snapshots, clones or a watcher (a VM that has it open). */
async function removeIfUnused(io: IoCtx, name: string): Promise<string | undefined> {
  try {
    await removeImage(io, name, { signal: AbortSignal.timeout(REMOVE_BOUND_MS) });
    return undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    if (isNotEmpty(err)) return 'has snapshots or clones';
    return `not removed: ${(err as Error).message}`;
  }
}
