import { createHash } from 'node:crypto';
import { RadosCluster, isNotFound, openImage, readImageIfExists } from '../ceph';
import type { IoCtx } from '../ceph';
import { imageLockers } from '../ceph/rbd-status-cli';
import type { ImageLocation } from '../ceph/rbd-status-cli';
import type { OmapCliOptions } from '../ceph/omap-cli';
import { readCatalog } from '../restore/catalog';
import { definitionRefusal } from '../restore/definition-allow-list';
import { pointRbdSourcesAt, rewriteForNewDomain } from '../restore/domain-xml-rewrite';
import type { RbdSite } from '../restore/domain-xml-rewrite';
import { verifyRestorePointMac } from '../restore/record-mac';
import { decodeDrPoint, snapOfDrPointKey } from '../model/dr-point';
import type { DrPoint } from '../model/dr-point';
import type { RestoreKey } from '../host/restore-key';

/*
 * dr-restore's plan (docs/dr.md#recovery-on-the-dr-site): every check, read only, on both sites,
 * before anything changes on either. Throws DrRestoreRefusal (exit 2) for what the operator asked
 * for that cannot be done; a cluster that cannot be reached throws what RadosCluster throws.
 */

export class DrRestoreRefusal extends Error {
  constructor(
    message: string,
    readonly type:
      | 'DrPointNotFound' | 'DrPointIncomplete' | 'RestoreRecordUntrusted' | 'DefinitionRefused' | 'NameConflict' | 'PrimaryStillActive' | 'NotMirrored'
      | 'PrimaryInUse' | 'PrimaryUnreachable',
  ) {
    super(message);
  }
}

export interface DrRestoreRequest {
  domain: string;
  from: string;
  as: string;
  /** The pool of the VM's disks on the DR site (their pool at the primary too). */
  pool: string;
  force: boolean;
  /** How QEMU on this host reaches the DR cluster. */
  site: RbdSite;
}

/** What the primary site says about one image, as far as it can be asked. */
export type PrimarySide = { reachable: false; why: string } | { reachable: true; images: { image: string; state: 'primary' | 'demoted' | 'absent' | 'not mirrored' }[] };

export interface DrRestorePlan {
  point: DrPoint;
  name: string;
  uuid: string;
  disks: { target: string; image: ImageLocation; snap: string; clone: ImageLocation; alreadyPrimary: boolean }[];
  xml: string;
  /** Promote with force (the primary is lost, unreachable, or --force), or plainly (it was demoted). */
  forcePromote: boolean;
  /** --planned: the primary's images to demote first (those still primary there), then wait for the demotion on the DR site. */
  demote?: ImageLocation[];
  primary: PrimarySide;
}

/** Every DR point record of `domain` (name or UUID) on the DR site's pool, newest first, one per run. */
export async function drPointsOf(io: IoCtx, domain: string): Promise<DrPoint[]> {
  const byRun = new Map<string, DrPoint>();
  for (const img of await readCatalog(io)) {
    for (const [key, value] of Object.entries(img.meta)) {
      const snap = snapOfDrPointKey(key);
      const p = snap === null ? null : decodeDrPoint(value, snap);
      if (!p || (p.domain.name !== domain && p.domain.uuid.toLowerCase() !== domain.toLowerCase())) continue;
      byRun.set(`${p.workflowId}@${p.snap}`, p);
    }
  }
  return [...byRun.values()].sort((a, b) => b.recordedAt.localeCompare(a.recordedAt));
}

/** Which of the point's disks the DR site lacks (the image, or the run's snapshot of it). */
async function missingDisks(io: IoCtx, p: DrPoint): Promise<string[]> {
  const out: string[] = [];
  for (const d of p.disks) {
    const image = d.source.split('/').at(-1)!;
    const has = await readImageIfExists(io, image, async (img) => (await img.listSnaps()).some((s) => s.namespace === 'user' && s.name === p.snap));
    if (!has) out.push(`${d.target} (${d.image})`);
  }
  return out;
}

/** `latest`: the newest point the DR site holds whole; else the point of that run (workflow or run id). */
export async function choosePoint(io: IoCtx, domain: string, from: string, pool: string): Promise<DrPoint> {
  const points = await drPointsOf(io, domain);
  if (!points.length) throw new DrRestoreRefusal(`the DR site holds no DR point of ${domain} (no DR point record in pool ${pool}): was it snapshotted with --mirror?`, 'DrPointNotFound');
  if (from === 'latest') {
    for (const p of points) if (!(await missingDisks(io, p)).length) return p;
    throw new DrRestoreRefusal(`the DR site holds no whole DR point of ${domain}: each lacks a disk's snapshot (${points.map((p) => p.workflowId).join(', ')})`, 'DrPointIncomplete');
  }
  const p = points.find((x) => x.workflowId === from || x.runId === from);
  if (!p) throw new DrRestoreRefusal(`run ${from} has no DR point of ${domain} on the DR site; it holds: ${points.map((x) => `${x.workflowId} (${x.recordedAt})`).join(', ')}`, 'DrPointNotFound');
  const missing = await missingDisks(io, p);
  if (missing.length) throw new DrRestoreRefusal(`the DR site lacks run ${from}'s snapshot of ${missing.join(', ')} (removed, or not copied yet)`, 'DrPointIncomplete');
  return p;
}

/** The record's MAC under the fleet's restore key, as restore --as checks it. */
export function checkTrusted(p: DrPoint, key: RestoreKey): void {
  if (!key.ok) throw new DrRestoreRefusal(`the DR point record of run ${p.workflowId} cannot be trusted: ${key.why}`, 'RestoreRecordUntrusted');
  const v = verifyRestorePointMac(p, key.key);
  if (!v.ok) throw new DrRestoreRefusal(`the DR point record of run ${p.workflowId} is not trusted: ${v.why}`, 'RestoreRecordUntrusted');
}

/**
 * The primary site's view of the point's images (`ceph`: this host's config for the primary
 * cluster). Unreachable within the connect timeout is an answer too: the primary is lost for now.
 */
export async function askPrimary(ceph: { conf: string; id: string; keyring?: string }, p: DrPoint, globalIds: Map<string, string>, timeoutSec = 5): Promise<PrimarySide> {
  let cluster: RadosCluster;
  try {
    cluster = await RadosCluster.connect({ ...ceph, connectTimeoutSec: timeoutSec });
  } catch (err) {
    return { reachable: false, why: (err as Error).message };
  }
  try {
    const images: { image: string; state: 'primary' | 'demoted' | 'absent' | 'not mirrored' }[] = [];
    for (const d of p.disks) {
      const [pool, ...rest] = d.source.split('/');
      const name = rest.at(-1)!;
      let io: IoCtx;
      try {
        io = await cluster.openIoCtx(pool!, rest.length > 1 ? rest[0] : '');
      } catch (err) {
        if (isNotFound(err)) { images.push({ image: d.source, state: 'absent' }); continue; }
        throw err;
      }
      try {
        const info = await readImageIfExists(io, name, (img) => img.getMirrorInfo());
        // The same name with another global id is another image (made after a failover): not our primary.
        if (!info || info.globalId !== globalIds.get(d.source)) images.push({ image: d.source, state: info ? 'not mirrored' : 'absent' });
        else images.push({ image: d.source, state: info.state === 'enabled' && info.primary ? 'primary' : info.state === 'enabled' ? 'demoted' : 'not mirrored' });
      } finally {
        await io.close();
      }
    }
    return { reachable: true, images };
  } catch (err) {
    return { reachable: false, why: (err as Error).message };
  } finally {
    await cluster.shutdown().catch(() => undefined);
  }
}

/** `pool/[namespace/]image` as a location. */
export function locationOf(spec: string): ImageLocation {
  const [pool, ...rest] = spec.split('/');
  return { pool: pool!, image: rest.at(-1)!, ...(rest.length > 1 ? { namespace: rest[0] } : {}) };
}

/**
 * `--planned` (docs/dr.md#planned-failover): the primary site must answer (it is asked to demote),
 * each image must mirror there (primary, or demoted by an earlier try), and none may be in use:
 * demoting a disk under a running VM makes it read-only beneath the guest. In use is what Ceph can
 * tell from here, the image's exclusive lock held (`rbd lock ls` on the primary cluster): the VM's
 * QEMU takes it at its first write and releases it when it closes the image, so a VM still running
 * holds it, and so does one whose QEMU died without closing. Returns the images to demote.
 */
export async function plannedDemotion(cli: OmapCliOptions, primary: PrimarySide): Promise<ImageLocation[]> {
  if (!primary.reachable) {
    throw new DrRestoreRefusal(
      `a planned failover demotes the primary's images, and the primary site does not answer (${primary.why}); without --planned, dr-restore force-promotes the DR copies`,
      'PrimaryUnreachable',
    );
  }
  const other = primary.images.filter((i) => i.state !== 'primary' && i.state !== 'demoted');
  if (other.length) throw new DrRestoreRefusal(`a planned failover needs every image mirrored at the primary site: ${other.map((i) => `${i.image} ${i.state}`).join(', ')}`, 'NotMirrored');
  const toDemote = primary.images.filter((i) => i.state === 'primary');
  const inUse: string[] = [];
  for (const i of toDemote) {
    const lockers = await imageLockers(cli, locationOf(i.image));
    if (lockers.length) inUse.push(`${i.image} (exclusive lock held by ${lockers.join(', ')})`);
  }
  if (inUse.length) {
    throw new DrRestoreRefusal(
      `the primary VM is still running, or its QEMU died holding its disks: ${inUse.join('; ')}. Shut the VM down on the primary site first (a planned failover demotes its disks, read-only beneath a running guest); a QEMU that died: rbd lock rm on the primary cluster, or dr-restore without --planned`,
      'PrimaryInUse',
    );
  }
  return toDemote.map((i) => locationOf(i.image));
}

/** The new VM's UUID, derived from its name and the point: re-running the same restore names the same VM. */
export function drRestoredUuid(name: string, p: DrPoint): string {
  const h = createHash('sha256').update(`vmsnap-dr-restore\0${name}\0${p.workflowId}\0${p.snap}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The definition dr-restore defines, allow-listed as restore --as's is. */
export function drDefinition(req: DrRestoreRequest, p: DrPoint, uuid: string, clones: Map<string, string>, imagePool: string): string {
  const renamed = rewriteForNewDomain(p.domainXml, { name: req.as, uuid, disks: clones });
  const xml = pointRbdSourcesAt(renamed, new Set(clones.values()), req.site);
  const why = definitionRefusal(xml, p.domainXml, { clones: new Set(clones.values()), imagePool, name: req.as, ownPaths: new Set([req.site.conf]) });
  if (why) throw new DrRestoreRefusal(`the recorded definition of ${p.domain.name} is refused: ${why}`, 'DefinitionRefused');
  return xml;
}

/** The DR site's state of each image of the point: its mirroring global id, and whether it is primary there already. */
export async function drSideOf(io: IoCtx, p: DrPoint): Promise<Map<string, { globalId: string; primary: boolean; enabled: boolean }>> {
  const out = new Map<string, { globalId: string; primary: boolean; enabled: boolean }>();
  for (const d of p.disks) {
    const img = await openImage(io, d.source.split('/').at(-1)!, { readOnly: true });
    try {
      const info = await img.getMirrorInfo();
      out.set(d.source, { globalId: info.globalId, primary: info.primary, enabled: info.state === 'enabled' });
    } finally {
      await img.close();
    }
  }
  return out;
}
