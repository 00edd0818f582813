import { isNotFound, openImage, removeImage } from '../ceph';
import type { Image, IoCtx } from '../ceph';
import { sameVm } from '../model/identity';
import type { RunScope } from '../model/identity';
import { IMAGE_SNAP } from '../model/naming';
import { META } from '../model/types';
import { removeSnapIfPresent } from '../ceph/remove-snap';

/*
 * Which images vmsnap may remove, and removing one. One rule for every remover: a schedule's
 * retention after its runs (activities/retention.ts), `vmsnap prune` and `vmsnap delete`.
 */

/** Whose images: a VM (by UUID) in a scope, and for a schedule's retention that schedule's only. */
export interface Owner {
  pool: string;
  /** Domain name as recorded in vmsnap.domain. */
  domain: string;
  /** The VM's libvirt UUID; undefined only in a retention retry from before UUIDs were recorded. */
  domainUuid?: string;
  scope: RunScope;
  /** Only images labelled vmsnap.label.schedule=<scheduleId>; undefined: any of the VM's. */
  scheduleId?: string;
}

/**
 * vmsnap made it, in this namespace and fleet, for this very VM (by UUID; and this schedule when
 * one is named) — and as this very image: rbd_clone copies image metadata, so a clone someone made
 * of one of our images carries all of these keys but names its parent in vmsnap.image.
 */
export function isOwned(meta: Readonly<Record<string, string>>, name: string, owner: Owner): boolean {
  return (
    meta[META.owner] === 'vmsnap' &&
    meta[META.image] === `${owner.pool}/${name}` &&
    (owner.scheduleId === undefined || meta[`${META.labelPrefix}schedule`] === owner.scheduleId) &&
    sameVm(meta, { domain: owner.domain, domainUuid: owner.domainUuid, scope: owner.scope })
  );
}

/**
 * Why removing the image would break something or lose someone else's data, or undefined:
 * rbd_get_parent (a clone: only flattened images are vmsnap's to remove), rbd_snap_list (a
 * snapshot vmsnap did not make), rbd_list_children (a clone hangs off it, e.g. a restored disk).
 */
export async function inUse(img: Image): Promise<string | undefined> {
  const parent = await img.parent();
  if (parent) return `is a clone of ${parent.pool}/${parent.image}@${parent.snap} (vmsnap prunes only flattened images)`;
  const foreign = (await img.listSnaps()).filter((s) => s.name !== IMAGE_SNAP);
  if (foreign.length) return `has snapshots vmsnap did not make: ${foreign.map((s) => s.name).join(', ')}`;
  if ((await img.listChildren()).length) return 'has clones (in use)';
  return undefined;
}

/** How a caller annotates each step (an activity: `during`, for its failure types). */
export type Step = <T>(doing: string, fn: () => Promise<T>) => Promise<T>;
const asIs: Step = (_doing, fn) => fn();

/**
 * Unprotects and removes the image's snapshot, then the image. Ownership and use are read again
 * on the open image first: a plan is made over a listing, and a name can be reused, or a clone
 * made, in between. Returns why it was left alone, if it was.
 */
export async function removeOwnedImage(io: IoCtx, name: string, owner: Owner, step: Step = asIs): Promise<string | undefined> {
  let img;
  try {
    img = await openImage(io, name);
  } catch (err) {
    if (isNotFound(err)) return 'already gone';
    throw err;
  }
  try {
    if (!isOwned(await img.listMetadata(), name, owner)) return owner.scheduleId ? 'no longer owned by this schedule' : "no longer one of this VM's images";
    const busy = await inUse(img);
    if (busy) return busy;
    await step(`remove ${name}@${IMAGE_SNAP}`, () => removeSnapIfPresent(img, IMAGE_SNAP));
  } finally {
    await img.close();
  }
  await step(`remove image ${name}`, () => removeImage(io, name));
  return undefined;
}
