import { Context } from '@temporalio/activity';
import { isNotFound, listImages, openImage, readImageIfExists, removeImage } from '../src/ceph';
import type { IoCtx } from '../src/ceph';
import { IMAGE_SNAP } from '../src/model/naming';
import { planRetention } from '../src/model/retention';
import type { RetentionImage, RetentionPolicy, RetentionResult } from '../src/model/retention';
import { sameVm } from '../src/model/identity';
import type { RunScope } from '../src/model/identity';
import { META } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';
import { removeSnapIfPresent } from './snapshots';

export interface RetentionRequest {
  pool: string;
  scheduleId: string;
  /** Domain name as recorded in vmsnap.domain. */
  domain: string;
  /**
   * The VM's libvirt UUID: only its images are considered (a recreated VM of the same name has
   * another). Absent only in a retry of an activity scheduled before UUIDs were recorded.
   */
  domainUuid?: string;
  policy: RetentionPolicy;
  /** The images this run just made: never pruned, whatever their metadata says. */
  keepImages: string[];
}

/**
 * Prunes one schedule's images of one domain down to its retention policy. Only images whose
 * metadata says vmsnap made them for this schedule and domain are considered; the plan is made
 * over all of them before anything is removed. An image in use (clones hang off it, or someone
 * added snapshots) is skipped and reported, never forced.
 */
export function applyRetention(deps: ActivityDeps) {
  return async function applyRetention(req: RetentionRequest): Promise<RetentionResult> {
    const io = await during(`open pool ${req.pool}`, () => deps.ioctx(req.pool));
    const owned = await scheduleImages(io, req, deps.scope);
    const plan = planRetention(owned, req.policy, Date.now(), { pinned: req.keepImages });
    const pruned: string[] = [];
    const skipped: RetentionResult['skipped'] = [];
    for (const name of plan.prune) {
      heartbeat({ pruned });
      const why = await pruneImage(deps, io, name, req);
      if (why) skipped.push({ image: name, reason: why });
      else pruned.push(name);
    }
    return { kept: plan.keep, pruned, skipped };
  };
}

/** The images this schedule made for this domain, read from their RBD metadata. */
async function scheduleImages(io: IoCtx, req: RetentionRequest, scope: RunScope): Promise<RetentionImage[]> {
  const names = await during(`list images in ${req.pool}`, () => listImages(io));
  const out: RetentionImage[] = [];
  for (const name of names) {
    const meta = await readMetadata(io, name);
    if (!meta || !isOurs(meta, req, name, scope)) continue;
    out.push({ name, createdAt: meta[META.createdAt] ?? '', state: meta[META.state] ?? '', run: meta[META.workflowId] });
  }
  return out;
}

/**
 * vmsnap made it, in this namespace and fleet, for this schedule and this very VM (by UUID) —
 * and as this very image: rbd_clone copies image metadata, so a clone someone made of one of our
 * images carries all of these keys but names its parent in vmsnap.image.
 */
function isOurs(meta: Record<string, string>, req: RetentionRequest, name: string, scope: RunScope): boolean {
  return (
    meta[META.owner] === 'vmsnap' &&
    meta[META.image] === `${req.pool}/${name}` &&
    meta[`${META.labelPrefix}schedule`] === req.scheduleId &&
    sameVm(meta, { domain: req.domain, domainUuid: req.domainUuid, scope })
  );
}

/** rbd_metadata_list through a read-only open; null when the image vanished since the listing. */
function readMetadata(io: IoCtx, name: string): Promise<Record<string, string> | null> {
  return readImageIfExists(io, name, (img) => during(`read metadata of ${name}`, () => img.listMetadata()));
}

/** Unprotect + remove `snap`, then remove the image. Returns why it was left alone, if it was. */
async function pruneImage(deps: ActivityDeps, io: IoCtx, name: string, req: RetentionRequest): Promise<string | undefined> {
  let img;
  try {
    img = await openImage(io, name);
  } catch (err) {
    if (isNotFound(err)) return 'already gone';
    throw err;
  }
  try {
    // Re-read ownership: the plan is over a listing, and a name can be reused between the two.
    if (!isOurs(await img.listMetadata(), req, name, deps.scope)) return 'no longer owned by this schedule';
    const parent = await img.parent();
    if (parent) return `is a clone of ${parent.pool}/${parent.image}@${parent.snap} (vmsnap prunes only flattened images)`;
    const snaps = await img.listSnaps();
    const foreign = snaps.filter((s) => s.name !== IMAGE_SNAP);
    if (foreign.length) return `has snapshots vmsnap did not make: ${foreign.map((s) => s.name).join(', ')}`;
    if ((await img.listChildren()).length) return 'has clones (in use)';
    await during(`remove ${name}@${IMAGE_SNAP}`, () => removeSnapIfPresent(img, IMAGE_SNAP));
  } finally {
    await img.close();
  }
  await during(`remove image ${name}`, () => removeImage(io, name));
  return undefined;
}

function heartbeat(details: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // called outside an activity (tests)
  }
}
