import { openImage } from '../ceph';
import type { IoCtx, OmapCliOptions } from '../ceph';
import type { LibvirtClient } from '../libvirt';
import { parseDomainXml } from '../libvirt';
import { parseRbdSpec, rbdSpec } from '../model/restore-plan';
import { RESTORE_META } from '../model/restore-point';
import { removeUnlessHeld } from './guarded-removal';

export interface ConfirmResult {
  removed: string[];
  kept: { disk: string; reason: string }[];
}

/**
 * `vmsnap restore <domain> --confirm <restore id>`: removes the disks an in-place restore
 * replaced. Only a disk that the domain's current disks name as what they replaced, that is marked
 * as replaced by that very restore, and that the domain no longer uses; one with snapshots of its
 * own, or that anyone has open or locked (a VM on another host, a dead client's lock), is kept and
 * reported (never forced), by the same guarded removal as the orphan reaper's.
 */
export async function confirmRestore(
  lv: LibvirtClient,
  open: (pool: string) => Promise<IoCtx>,
  cli: OmapCliOptions,
  domain: string,
  workflowId: string,
): Promise<ConfirmResult> {
  const dom = await lv.lookupDomain(domain);
  const info = parseDomainXml(await lv.getDomainXml(dom, { inactive: true }));
  const inUse = new Set(info.disks.flatMap((d) => (d.rbd ? [`${d.rbd.pool}/${d.rbd.image}`] : [])));
  const out: ConfirmResult = { removed: [], kept: [] };
  for (const d of info.disks) {
    if (!d.rbd || d.rbd.namespace) continue;
    const io = await open(d.rbd.pool);
    const img = await openImage(io, d.rbd.image, { readOnly: true });
    let previous: string | null;
    try {
      previous = (await img.getMetadata(RESTORE_META.workflowId)) === workflowId ? await img.getMetadata(RESTORE_META.previous) : null;
    } finally {
      await img.close();
    }
    if (!previous) continue;
    const why = await removeReplaced(open, cli, parseRbdSpec(previous), workflowId, inUse);
    if (why) out.kept.push({ disk: previous, reason: why });
    else out.removed.push(previous);
  }
  return out;
}

async function removeReplaced(
  open: (pool: string) => Promise<IoCtx>,
  cli: OmapCliOptions,
  loc: { pool: string; image: string },
  workflowId: string,
  inUse: Set<string>,
): Promise<string | undefined> {
  if (inUse.has(rbdSpec(loc))) return 'the domain still uses it';
  const io = await open(loc.pool);
  let img;
  try {
    img = await openImage(io, loc.image, { readOnly: true });
  } catch {
    return 'already gone';
  }
  try {
    if ((await img.getMetadata(RESTORE_META.replacedBy)) !== workflowId) return `not marked as replaced by ${workflowId}`;
    const snaps = await img.listSnaps();
    if (snaps.length) return `has snapshots: ${snaps.map((s) => s.name).join(', ')}`;
  } finally {
    await img.close();
  }
  return removeUnlessHeld(cli, loc);
}
