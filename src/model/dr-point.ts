import { decodeRestorePoint } from './restore-point';
import type { RestorePoint } from './restore-point';

/*
 * The DR point record (docs/dr.md#recovery-on-the-dr-site): what `vmsnap dr-restore` needs on the
 * DR site, written by a DR run on each of its VM's own disk images (RBD image metadata, key
 * `vmsnap.dr-point.<run's snapshot name>`) right before the mirror snapshots. rbd-mirror carries
 * an image's metadata with each mirror snapshot, so the DR site's copy of each image holds the
 * record of every DR point it holds. The same shape and MAC as a restore record
 * (src/model/restore-point.ts): the run, the domain, quiesced as the run's own thaw established
 * it, the recorded definition. `disks[].source` is the VM's disk `pool/image` (its name on the DR
 * site too) and `disks[].image` the point there, `pool/image@snap`: under the record's MAC, so a
 * record moved to another key or snapshot does not verify.
 */

export const DR_POINT_PREFIX = 'vmsnap.dr-point.';

export interface DrPoint extends RestorePoint {
  /** The run's snapshot of every disk, the DR point on the DR site. */
  snap: string;
}

export function drPointKey(snap: string): string {
  return `${DR_POINT_PREFIX}${snap}`;
}

/** The snapshot a metadata key is the DR point record of, or null for any other key. */
export function snapOfDrPointKey(key: string): string | null {
  return key.startsWith(DR_POINT_PREFIX) && key.length > DR_POINT_PREFIX.length ? key.slice(DR_POINT_PREFIX.length) : null;
}

export function encodeDrPoint(p: Omit<DrPoint, 'v'>): string {
  return JSON.stringify({ v: 1, ...p });
}

/** null for anything that is not a DR point record of snapshot `snap` (every disk's point that snapshot). */
export function decodeDrPoint(value: string | null | undefined, snap: string): DrPoint | null {
  const p = decodeRestorePoint(value) as DrPoint | null;
  if (!p || p.snap !== snap) return null;
  return p.disks.every((d) => d.image === `${d.source}@${snap}`) ? p : null;
}
