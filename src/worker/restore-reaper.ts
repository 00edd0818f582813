import { listImages, readImageIfExists } from '../ceph';
import type { ImageLocation, IoCtx, OmapCliOptions } from '../ceph';
import type { LibvirtClient } from '../libvirt';
import { parseDomainXml } from '../libvirt';
import { restoreIdsOf, restoreLeftoverAction } from '../model/restore-leftovers';
import type { RunStatus } from '../model/restore-leftovers';
import type { RunScope } from '../model/identity';
import { RESTORE_META } from '../model/restore-point';
import { removeUnlessHeld } from '../restore/guarded-removal';

export interface RestoreReapOptions {
  scope: RunScope;
  /** This worker's host id: it reaps only the disks its own host made or replaced. */
  host: string;
  keepReplacedMs: number;
  ioctx: (pool: string, namespace?: string) => Promise<IoCtx>;
  statusOf: (workflowId: string) => Promise<RunStatus>;
  /** How the `rbd` CLI connects: watchers, lock holders and the removal, each bounded and killed. */
  cli: OmapCliOptions;
}

export interface RestoreReapReport {
  removed: string[];
  /** Leftovers the reaper would remove but could not (snapshots or clones of their own, open). */
  kept: { disk: string; reason: string }[];
}

/**
 * The restore half of the orphan reaper (decisions in src/model/restore-leftovers.ts): in every
 * pool a domain defined on this host has an RBD disk in, it removes the disks of restores that
 * ended without completing and the disks completed in-place restores replaced once they are
 * `keepReplacedMs` old — only those this host made or replaced: every host reaps the shared
 * pools, but each sees only its own domains. The set of disks in use is read from every defined
 * domain's inactive and, when running, live XML just before the pools are listed; the removal
 * itself keeps any disk Ceph says someone holds (src/restore/guarded-removal.ts).
 */
export async function reapRestoreLeftovers(lv: LibvirtClient, o: RestoreReapOptions): Promise<RestoreReapReport> {
  const inUse = await disksInUse(lv);
  const out: RestoreReapReport = { removed: [], kept: [] };
  for (const [pool, namespaces] of poolsOf(inUse)) {
    for (const ns of namespaces) {
      const io = await o.ioctx(pool, ns || undefined);
      for (const name of await listImages(io)) {
        const spec = ns ? `${pool}/${ns}/${name}` : `${pool}/${name}`;
        const meta = await metadataOf(io, name);
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
        const loc: ImageLocation = { pool, image: name, ...(ns ? { namespace: ns } : {}) };
        const refused = await removeUnlessHeld(o.cli, loc);
        if (refused) out.kept.push({ disk: spec, reason: `${why}; ${refused}` });
        else out.removed.push(`${spec} (${why})`);
      }
    }
  }
  return out;
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

function metadataOf(io: IoCtx, name: string): Promise<Record<string, string> | null> {
  return readImageIfExists(io, name, (img) => img.listMetadata());
}
