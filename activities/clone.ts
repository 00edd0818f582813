import { cloneImage, imageExists, openImage, removeImage } from '../src/ceph';
import type { Image } from '../src/ceph';
import { IDENTITY_META, identityMetadata } from '../src/model/identity';
import type { RunScope } from '../src/model/identity';
import { META } from '../src/model/types';
import type { RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

export interface CloneRequest {
  workflowId: string;
  domain: string;
  /** The VM's libvirt UUID: retention matches on it, not on the name. */
  domainUuid?: string;
  target: string;
  source: RbdLocation;
  snap: string;
  image: RbdLocation;
  labels: Record<string, string>;
}

/**
 * rbd_clone3 of the frozen-time snapshot into the image pool (clone v2: no protect needed on a
 * cluster that requires mimic clients), with ownership recorded on the new image so retention,
 * retries and cleanup only ever touch what this workflow created.
 */
export function cloneDisk(deps: ActivityDeps) {
  return async function cloneDisk(req: CloneRequest): Promise<{ recloned: boolean; complete?: boolean }> {
    const childIo = await deps.ioctx(req.image.pool, req.image.namespace);
    let recloned = false;
    if (await imageExists(childIo, req.image.image)) {
      const img = await openImage(childIo, req.image.image);
      let done: boolean;
      try {
        done = (await img.getMetadata(META.state)) === 'complete';
      } finally {
        await img.close();
      }
      // Finished by an earlier run of this id (a reset to a point after the freeze): its source
      // snapshot is gone, so the workflow skips flatten and finalize for it.
      if (done) return { recloned: false, complete: true };
      // An earlier attempt's clone. Its flatten may have been interrupted, and re-running an
      // interrupted flatten corrupts data on Ceph 16 (tracker 68998): start from a fresh clone.
      await during('remove stale clone', () => removeImage(childIo, req.image.image));
      recloned = true;
    }
    await createClone(deps, req);
    return { recloned };
  };
}

export async function createClone(deps: ActivityDeps, req: CloneRequest): Promise<void> {
  const parentIo = await deps.ioctx(req.source.pool, req.source.namespace);
  const childIo = await deps.ioctx(req.image.pool, req.image.namespace);
  await during(`clone ${req.source.image}@${req.snap}`, () =>
    cloneImage(parentIo, req.source.image, req.snap, childIo, req.image.image),
  );
  const img = await openImage(childIo, req.image.image);
  try {
    await writeOwnership(img, req, deps.scope);
  } finally {
    await img.close();
  }
  deps.metrics.clones.inc();
}

async function writeOwnership(img: Image, req: CloneRequest, scope: RunScope): Promise<void> {
  // rbd_clone copies the parent's image metadata. A VM restored from a vmsnap image carries that
  // image's vmsnap.* keys (schedule label, flatten marker...): none of them describe this image.
  for (const key of Object.keys(await img.listMetadata())) {
    if (key.startsWith('vmsnap.')) await img.removeMetadata(key);
  }
  await img.setMetadata(META.owner, 'vmsnap');
  // The image's own name: a clone someone makes of this image inherits these keys, but not this value.
  await img.setMetadata(META.image, `${req.image.pool}/${req.image.image}`);
  await img.setMetadata(META.workflowId, req.workflowId);
  await img.setMetadata(META.domain, req.domain);
  const identity = identityMetadata(req.domainUuid ?? '', scope);
  if (!req.domainUuid) delete identity[IDENTITY_META.domainUuid];
  for (const [k, v] of Object.entries(identity)) await img.setMetadata(k, v);
  await img.setMetadata(META.source, `${req.source.pool}/${req.source.image}@${req.snap}`);
  await img.setMetadata(META.createdAt, new Date().toISOString());
  await img.setMetadata(META.state, 'cloned');
  for (const [k, v] of Object.entries(req.labels)) await img.setMetadata(`${META.labelPrefix}${k}`, v);
}

/** True when the image is this workflow's: by recorded owner, or by being a clone of our snapshot. */
export async function ownedBy(img: Image, workflowId: string, source?: { image: string; snap: string }): Promise<boolean> {
  if ((await img.getMetadata(META.workflowId)) === workflowId) return true;
  const parent = await img.parent();
  return !!(source && parent && parent.image === source.image && parent.snap === source.snap);
}

