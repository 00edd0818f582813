import { listImages, readImageIfExists } from '../ceph';
import type { ImageLocation, IoCtx, OmapCliOptions } from '../ceph';
import { isNoDomain } from '../libvirt';
import type { LibvirtClient } from '../libvirt';
import { definedRbdDisks } from '../host/defined-disks';
import type { DiskUser } from '../host/defined-disks';
import { restoreIdsOf, restoreLeftoverAction, throwawayCopyToEnd } from '../model/restore-leftovers';
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
  /**
   * Which of these disks a domain defined on another host of the fleet uses, and which hosts
   * could not say (workflows/fleet-disks.ts). Throws when the fleet cannot be asked.
   */
  definedElsewhere: (disks: string[]) => Promise<DefinedElsewhere>;
}

export interface DefinedElsewhere {
  used: { disk: string; domain: string; host: string }[];
  /** Hosts not lost that did not answer: any of them may define any of the disks. */
  unanswered: string[];
}

export interface RestoreReapReport {
  /** Disks removed, and throw-away copies (domains) ended: `domain <name> (…)`. */
  removed: string[];
  /** Leftovers the reaper would remove but could not (snapshots or clones of their own, open). */
  kept: { disk: string; reason: string }[];
}

/**
 * The restore half of the orphan reaper (decisions in src/model/restore-leftovers.ts): in every
 * pool a domain defined on this host has an RBD disk in, it removes the disks of restores that
 * ended without completing and the disks completed in-place restores replaced once they are
 * `keepReplacedMs` old — only those this host made or replaced: every host reaps the shared
 * pools, but each sees only its own domains. "In use" is fleet-wide: the disks in use here are
 * read from every defined domain's inactive and, when running, live XML just before the pools are
 * listed; every other host that is not lost is asked about the candidates before any removal (a
 * kept VM moved to another host and shut off there keeps its disk), and one that cannot answer
 * keeps them all. The removal itself keeps any disk Ceph says someone holds
 * (src/restore/guarded-removal.ts). A throw-away copy of a closed verify run is first destroyed
 * and undefined (throwawayCopyToEnd): its disks are then no longer in use here.
 */
export async function reapRestoreLeftovers(lv: LibvirtClient, o: RestoreReapOptions): Promise<RestoreReapReport> {
  const inUse = await definedRbdDisks(lv);
  const out: RestoreReapReport = { removed: [], kept: [] };
  const candidates: { spec: string; loc: ImageLocation; why: string }[] = [];
  for (const [pool, namespaces] of poolsOf(new Set(inUse.keys()))) {
    for (const ns of namespaces) {
      const io = await o.ioctx(pool, ns || undefined);
      for (const name of await listImages(io)) {
        const spec = ns ? `${pool}/${ns}/${name}` : `${pool}/${name}`;
        const meta = await metadataOf(io, name);
        if (!meta || !(RESTORE_META.workflowId in meta || RESTORE_META.replacedBy in meta)) continue;
        const statuses = new Map<string, RunStatus>();
        for (const id of Object.values(restoreIdsOf(meta))) statuses.set(id, await o.statusOf(id));
        const statusOf = (id: string) => statuses.get(id) ?? 'UNKNOWN';
        const copy = throwawayCopyToEnd(meta, { scope: o.scope, host: o.host, statusOf, users: inUse.get(spec) ?? [] });
        if (copy) {
          for (const d of copy.domains) {
            await endDomain(lv, d.uuid);
            out.removed.push(`domain ${d.name} (throw-away copy of restore ${copy.workflowId} ${copy.status})`);
          }
          forgetUsers(inUse, new Set(copy.domains.map((d) => d.uuid)));
        }
        const decision = restoreLeftoverAction(meta, {
          scope: o.scope,
          host: o.host,
          now: Date.now(),
          keepReplacedMs: o.keepReplacedMs,
          inUse: inUse.has(spec),
          statusOf,
        });
        if (decision.action === 'leave') continue;
        const why = decision.action === 'remove-clone' ? `restore ${decision.workflowId} ${decision.status}` : `replaced by ${decision.workflowId} at ${decision.replacedAt}`;
        candidates.push({ spec, why, loc: { pool, image: name, ...(ns ? { namespace: ns } : {}) } });
      }
    }
  }
  if (!candidates.length) return out;
  let elsewhere: DefinedElsewhere;
  try {
    elsewhere = await o.definedElsewhere(candidates.map((c) => c.spec));
  } catch (err) {
    for (const c of candidates) out.kept.push({ disk: c.spec, reason: `${c.why}; the fleet could not be asked whether another host uses it: ${String(err)}` });
    return out;
  }
  for (const c of candidates) {
    const users = elsewhere.used.filter((u) => u.disk === c.spec);
    if (users.length) {
      out.kept.push({ disk: c.spec, reason: `${c.why}; in use: ${users.map((u) => `domain ${u.domain} on ${u.host}`).join(', ')}` });
      continue;
    }
    if (elsewhere.unanswered.length) {
      out.kept.push({ disk: c.spec, reason: `${c.why}; ${elsewhere.unanswered.join(', ')} did not answer whether a domain there uses it` });
      continue;
    }
    const refused = await removeUnlessHeld(o.cli, c.loc);
    if (refused) out.kept.push({ disk: c.spec, reason: `${c.why}; ${refused}` });
    else out.removed.push(`${c.spec} (${c.why})`);
  }
  return out;
}

/** Destroyed when running, then undefined; gone already (another sweep, an operator) is done. */
async function endDomain(lv: LibvirtClient, uuid: string): Promise<void> {
  try {
    const dom = await lv.lookupDomain(uuid);
    if ((await lv.getDomainState(dom)).state !== 'shutoff') await lv.domainDestroy(dom);
    await lv.domainUndefineFlags(dom);
  } catch (err) {
    if (!isNoDomain(err)) throw err;
  }
}

/** The ended domains no longer use their disks (every disk of a copy, in every pool). */
function forgetUsers(inUse: Map<string, DiskUser[]>, ended: Set<string>): void {
  for (const [spec, users] of inUse) {
    const left = users.filter((u) => !ended.has(u.uuid));
    if (left.length) inUse.set(spec, left);
    else inUse.delete(spec);
  }
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
