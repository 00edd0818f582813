import { decodeVerification } from './verification';
import type { CheckOutcome, Verification } from './verification';
import { META } from './types';
import type { RbdLocation } from './types';

/*
 * What a restore needs from a snapshot run, recorded on the run's images (RBD image metadata,
 * key `vmsnap.restore-point`) once they are finalized: the domain definition as libvirt had it
 * (inactive XML, read without VIR_DOMAIN_XML_SECURE, so no passwords), which disk target each
 * image was, the quiesced state and the run. Every image of the set carries the same record, so
 * any one of them is enough to rebuild the VM.
 */

export { RESTORE_POINT_KEY } from './metadata-keys';
import { RESTORE_POINT_KEY, VERIFY_META } from './metadata-keys';
const VERSION = 1;

export interface RestorePointDisk {
  /** Guest device, e.g. `vdb`. */
  target: string;
  /** `pool/image` of the finalized image. */
  image: string;
  /** `pool/image` the disk was on when snapshotted. */
  source: string;
}

export interface RestorePoint {
  v: number;
  workflowId: string;
  runId: string;
  domain: { name: string; uuid: string };
  quiesced: boolean;
  /** When the record was written (just after the images were finalized). */
  recordedAt: string;
  disks: RestorePointDisk[];
  /** virDomainGetXMLDesc(VIR_DOMAIN_XML_INACTIVE) of the domain at snapshot time. */
  domainXml: string;
  /** `hmac-sha256:<key id>:<hex>` with the fleet's restore key (src/restore/record-mac.ts); absent when written without one. */
  mac?: string;
}

export const RESTORE_POINT_VERSION = VERSION;

export function encodeRestorePoint(p: Omit<RestorePoint, 'v'>): string {
  return JSON.stringify({ v: VERSION, ...p });
}

/** null for anything that is not a record this version understands. */
export function decodeRestorePoint(value: string | null | undefined): RestorePoint | null {
  if (!value) return null;
  try {
    const p = JSON.parse(value) as Partial<RestorePoint>;
    if (p.v !== VERSION || typeof p.workflowId !== 'string' || typeof p.domainXml !== 'string' || !Array.isArray(p.disks)) return null;
    if (!p.domain || typeof p.domain.name !== 'string' || typeof p.domain.uuid !== 'string') return null;
    if (p.mac !== undefined && typeof p.mac !== 'string') return null;
    return p as RestorePoint;
  } catch {
    return null;
  }
}

/** One image as `vmsnap list` sees it: its own vmsnap metadata, read in one call. */
export interface CatalogImage {
  pool: string;
  name: string;
  sizeBytes: number;
  meta: Record<string, string>;
}

/** All images one snapshot run made for one VM. */
export interface ImageSet {
  workflowId: string;
  runId?: string;
  domain: string;
  domainUuid?: string;
  /** The earliest image creation time of the set (ISO 8601). */
  createdAt: string;
  quiesced: boolean | null;
  /** Every image finalized (`vmsnap.state=complete`) and a restore record present. */
  complete: boolean;
  restorable: boolean;
  schedule?: string;
  /** The last `vmsnap verify` verdict on this set. */
  verification?: Verification;
  disks: { target: string; image: string; sizeBytes: number; state: string }[];
}

/**
 * vmsnap made the image as this very image: rbd_clone copies image metadata, so a clone of one of
 * our images carries our keys but names its parent in `vmsnap.image`.
 */
export function isVmsnapImage(img: CatalogImage): boolean {
  return img.meta[META.owner] === 'vmsnap' && img.meta[META.image] === `${img.pool}/${img.name}`;
}

/**
 * Groups a pool's images into the image sets of `domain` (its name or UUID), newest first. Pure:
 * the listing and the metadata reads happen in the caller.
 */
export function imageSetsOf(domain: string, images: CatalogImage[]): ImageSet[] {
  const wanted = domain.toLowerCase();
  const byRun = new Map<string, CatalogImage[]>();
  for (const img of images) {
    if (!isVmsnapImage(img)) continue;
    const point = decodeRestorePoint(img.meta[RESTORE_POINT_KEY]);
    const name = img.meta[META.domain];
    if (name !== domain && point?.domain.uuid.toLowerCase() !== wanted) continue;
    const wf = img.meta[META.workflowId] ?? '';
    byRun.set(wf, [...(byRun.get(wf) ?? []), img]);
  }
  const sets = [...byRun.entries()].map(([workflowId, imgs]) => toSet(workflowId, imgs));
  return sets.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.workflowId < b.workflowId ? 1 : -1));
}

/**
 * Every VM's image sets in a pool (`vmsnap list` without a domain): by VM name, then UUID, each
 * VM's newest first. Pure, like {@link imageSetsOf}.
 */
export function everyImageSet(images: CatalogImage[]): ImageSet[] {
  const byRun = new Map<string, CatalogImage[]>();
  for (const img of images) {
    if (!isVmsnapImage(img)) continue;
    const wf = img.meta[META.workflowId] ?? '';
    byRun.set(wf, [...(byRun.get(wf) ?? []), img]);
  }
  const sets = [...byRun.entries()].map(([workflowId, imgs]) => toSet(workflowId, imgs));
  const vm = (s: ImageSet) => `${s.domain}\u0000${s.domainUuid ?? ''}`;
  return sets.sort((a, b) => (vm(a) < vm(b) ? -1 : vm(a) > vm(b) ? 1 : a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.workflowId < b.workflowId ? 1 : -1));
}

function toSet(workflowId: string, imgs: CatalogImage[]): ImageSet {
  const point = imgs.map((i) => decodeRestorePoint(i.meta[RESTORE_POINT_KEY])).find((p) => p !== null) ?? null;
  const targetOf = (img: CatalogImage): string =>
    point?.disks.find((d) => d.image === `${img.pool}/${img.name}`)?.target ?? img.meta[META.source] ?? '?';
  const disks = imgs
    .map((i) => ({ target: targetOf(i), image: `${i.pool}/${i.name}`, sizeBytes: i.sizeBytes, state: i.meta[META.state] ?? '' }))
    .sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0));
  const allComplete = disks.every((d) => d.state === 'complete');
  // A record lists every disk of the run: a set missing one of them is not restorable.
  const allPresent = !!point && point.disks.every((d) => disks.some((x) => x.image === d.image));
  const q = imgs[0].meta[META.quiesced];
  const schedule = imgs[0].meta[`${META.labelPrefix}schedule`];
  // Written on every image of the set; the newest verdict wins when a write was interrupted.
  const verification = imgs.map((i) => decodeVerification(i.meta[VERIFY_META])).filter((v) => v !== undefined).sort((a, b) => (a.at < b.at ? 1 : -1))[0];
  return {
    workflowId,
    ...(point ? { runId: point.runId, domainUuid: point.domain.uuid } : {}),
    domain: imgs[0].meta[META.domain] ?? '',
    createdAt: imgs.map((i) => i.meta[META.createdAt] ?? '').sort()[0] ?? '',
    quiesced: q === 'true' ? true : q === 'false' ? false : null,
    complete: allComplete,
    restorable: allComplete && allPresent,
    ...(schedule ? { schedule } : {}),
    ...(verification ? { verification } : {}),
    disks,
  };
}


export { RESTORE_META } from './metadata-keys';

export interface RestoreDiskPlan {
  target: string;
  /** The finalized image and its snapshot the disk is cloned from. */
  image: RbdLocation;
  snap: string;
  /** The disk the restore creates. */
  clone: RbdLocation;
  /** In place: the VM's disk it replaces (kept until confirmed). */
  previous?: RbdLocation;
}

export interface RestorePlan {
  mode: 'as' | 'in-place';
  /** The domain that ends up restored: the new one (`as`) or the VM itself. */
  domain: { name: string; uuid: string };
  /** The VM the image set was taken of. */
  source: { name: string; uuid: string };
  fromWorkflowId: string;
  quiesced: boolean;
  takenAt: string;
  /** In place: the VM ran when the restore was planned (so a failed restore starts it again). */
  wasRunning: boolean;
  /** Whether the domain has a guest agent channel: ready means the agent answers. */
  hasAgent: boolean;
  /** A completed earlier run of this restore id already did everything. */
  alreadyRestored: boolean;
  /** `as`: defined without network interfaces. */
  isolate?: boolean;
  disks: RestoreDiskPlan[];
}

export interface RestoreResult {
  workflowId: string;
  mode: RestorePlan['mode'];
  domain: { name: string; uuid: string };
  from: { workflowId: string; quiesced: boolean; takenAt: string };
  disks: { target: string; disk: string; from: string; previous?: string; flattened: boolean; sha256?: string }[];
  /** In place: the replaced disks, kept until `vmsnap restore --confirm <workflow id>`. */
  kept: string[];
  reusedExisting?: boolean;
  /** A throw-away copy (input.throwaway): the check's outcome; the copy and its disks are gone. */
  check?: CheckOutcome;
  discarded?: boolean;
  stepsMs: Record<string, number>;
}
