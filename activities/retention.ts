import { Context } from '@temporalio/activity';
import { listImages, readImageIfExists } from '../src/ceph';
import type { IoCtx } from '../src/ceph';
import { planRetention } from '../src/model/retention';
import type { RetentionImage, RetentionPolicy, RetentionResult } from '../src/model/retention';
import { META } from '../src/model/types';
import { isOwned, removeOwnedImage } from '../src/retention/owned-images';
import type { Owner } from '../src/retention/owned-images';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

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
    const owner: Owner = { pool: req.pool, domain: req.domain, domainUuid: req.domainUuid, scope: deps.scope, scheduleId: req.scheduleId };
    const owned = await scheduleImages(io, req.pool, owner);
    const plan = planRetention(owned, req.policy, Date.now(), { pinned: req.keepImages });
    const pruned: string[] = [];
    const skipped: RetentionResult['skipped'] = [];
    for (const name of plan.prune) {
      heartbeat({ pruned });
      const why = await removeOwnedImage(io, name, owner, during);
      if (why) skipped.push({ image: name, reason: why });
      else pruned.push(name);
    }
    return { kept: plan.keep, pruned, skipped };
  };
}

/** The images this schedule made for this domain, read from their RBD metadata. */
async function scheduleImages(io: IoCtx, pool: string, owner: Owner): Promise<RetentionImage[]> {
  const names = await during(`list images in ${pool}`, () => listImages(io));
  const out: RetentionImage[] = [];
  for (const name of names) {
    const meta = await readMetadata(io, name);
    if (!meta || !isOwned(meta, name, owner)) continue;
    out.push({ name, createdAt: meta[META.createdAt] ?? '', state: meta[META.state] ?? '', run: meta[META.workflowId] });
  }
  return out;
}

/** rbd_metadata_list through a read-only open; null when the image vanished since the listing. */
function readMetadata(io: IoCtx, name: string): Promise<Record<string, string> | null> {
  return readImageIfExists(io, name, (img) => during(`read metadata of ${name}`, () => img.listMetadata()));
}

function heartbeat(details: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // called outside an activity (tests)
  }
}
