import { FailureType } from './failures';
import { RBD_NAME } from './input';
import { fnv1a64 } from './naming';
import type { ImageSet } from './restore-point';
import type { RbdLocation } from './types';

/*
 * Names and choices of a restore, pure functions of the workflow id and the catalog: a re-run of
 * the same restore id finds (and reuses) the clones and the domain an earlier attempt made.
 */

/** The new VM's UUID: derived from the workflow id, so a re-run redefines the same domain. */
export function restoredDomainUuid(workflowId: string): string {
  const h = (fnv1a64(`uuid-a/${workflowId}`) + fnv1a64(`uuid-b/${workflowId}`)).split('');
  h[12] = '4'; // version 4 layout (random-looking), variant 10xx
  h[16] = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  const s = h.join('');
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20, 32)}`;
}

/** `--as NEW`: the new VM's disks are `<NEW>-<target>` in the VM pool. */
export function restoredDiskNameAs(newName: string, target: string): string {
  const name = `${newName}-${target}`;
  return RBD_NAME.test(name) ? name : `vmsnap-restore-${target}-${fnv1a64(newName)}`;
}

/** In place: the disk that replaces `previous` is `<previous>-r<8 hex of the workflow id>`. */
export function restoredDiskNameInPlace(previous: string, workflowId: string): string {
  const name = `${previous}-r${fnv1a64(workflowId).slice(0, 8)}`;
  return RBD_NAME.test(name) ? name : `vmsnap-restore-${fnv1a64(`${previous}/${workflowId}`)}`;
}

export type SetChoice = { ok: true; set: ImageSet } | { ok: false; type: FailureType; message: string };

/** `latest`: the newest restorable set; otherwise the set of that run, which must be restorable. */
export function chooseImageSet(domain: string, sets: ImageSet[], from: string): SetChoice {
  if (from === 'latest') {
    const set = sets.find((s) => s.restorable);
    if (set) return { ok: true, set };
    const why = sets.length ? `none of its ${sets.length} image set(s) is complete with a restore record` : 'it has no image sets';
    return { ok: false, type: FailureType.RestorePointNotFound, message: `nothing to restore for ${domain}: ${why}` };
  }
  const set = sets.find((s) => s.workflowId === from);
  if (!set) return { ok: false, type: FailureType.RestorePointNotFound, message: `${domain} has no image set from run ${from}` };
  if (!set.restorable) {
    const why = set.complete ? 'it has no restore record (taken before restore points existed?)' : 'not every image is finalized';
    return { ok: false, type: FailureType.RestorePointIncomplete, message: `run ${from} of ${domain} cannot be restored: ${why}` };
  }
  return { ok: true, set };
}

export function parseRbdSpec(spec: string): RbdLocation {
  const parts = spec.split('/');
  const loc: RbdLocation = { pool: parts[0] ?? '', image: parts[parts.length - 1] ?? '' };
  if (parts.length >= 3) loc.namespace = parts.slice(1, -1).join('/');
  return loc;
}

export function rbdSpec(loc: RbdLocation): string {
  return loc.namespace ? `${loc.pool}/${loc.namespace}/${loc.image}` : `${loc.pool}/${loc.image}`;
}
