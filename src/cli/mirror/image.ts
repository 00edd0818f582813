import { isNotFound, openImage } from '../../ceph';
import type { Image, IoCtx, MirrorImageMode, MirrorSiteStatus } from '../../ceph';

/*
 * What one image's mirroring is, read on a read-only handle (no lock involved, so no bound beyond
 * the caller's): on the VMs' cluster, and on the DR site's copy of it.
 */

/** RBD_FEATURE_EXCLUSIVE_LOCK. */
const EXCLUSIVE_LOCK = 4n;

/** A site's status of the image, as `rbd mirror image status` prints it: `up+replaying`, `down+stopped`, ... */
export interface SiteView {
  /** Empty: the cluster this was read on; else the peer site's mirror uuid. */
  mirrorUuid: string;
  status: string;
  description: string;
  /** Seconds since the epoch of its rbd-mirror's last report; 0 when none. */
  lastUpdate: number;
}

export interface ImageMirroring {
  exists: boolean;
  state: 'disabling' | 'enabled' | 'disabled';
  /** Only when enabled. */
  mode?: MirrorImageMode;
  primary: boolean;
  globalId: string;
  exclusiveLock: boolean;
  /** What each site's rbd-mirror last reported for the image (rbd_mirror_image_get_global_status). */
  sites: SiteView[];
}

const ABSENT: ImageMirroring = { exists: false, state: 'disabled', primary: false, globalId: '', exclusiveLock: false, sites: [] };

export const siteView = (s: MirrorSiteStatus): SiteView => ({
  mirrorUuid: s.mirrorUuid,
  status: `${s.up ? 'up' : 'down'}+${s.state}`,
  description: s.description,
  lastUpdate: s.lastUpdate,
});

async function readOnly<T>(io: IoCtx, name: string, fn: (img: Image) => Promise<T>): Promise<T | undefined> {
  let img: Image;
  try {
    img = await openImage(io, name, { readOnly: true });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  try {
    return await fn(img);
  } finally {
    await img.close();
  }
}

/** rbd_get_features, rbd_mirror_image_get_info (+ _get_mode when enabled), rbd_mirror_image_get_global_status. */
export async function readImageMirroring(io: IoCtx, name: string): Promise<ImageMirroring> {
  const read = await readOnly(io, name, async (img) => {
    const exclusiveLock = ((await img.features()) & EXCLUSIVE_LOCK) !== 0n;
    const info = await img.getMirrorInfo();
    if (info.state === 'disabled') return { ...ABSENT, exists: true, exclusiveLock };
    const mode = info.state === 'enabled' ? await img.getMirrorMode() : undefined;
    const status = await img.getMirrorStatus();
    return { exists: true, state: info.state, ...(mode ? { mode } : {}), primary: info.primary, globalId: info.globalId, exclusiveLock, sites: status.siteStatuses.map(siteView) };
  });
  return read ?? ABSENT;
}

/** The DR site's copy of an image: what rbd-mirror there made of it. */
export interface DrImageView {
  present: boolean;
  state?: ImageMirroring['state'];
  primary?: boolean;
  globalId?: string;
  /** The DR site's rbd-mirror's own status of the image (its local site status): `up+replaying` when healthy. */
  daemon?: SiteView;
  /** The newest mirror snapshot copied there in full: the primary's snapshot id it copies. */
  lastCopied?: { primarySnapId: number; drSnapId: number };
  /** A mirror snapshot being copied now. */
  copying?: { primarySnapId: number; objects: number };
}

/** Reads the DR site's copy of `name` (read only, the DR site's own session). */
export async function readDrImage(io: IoCtx, name: string): Promise<DrImageView> {
  const read = await readOnly(io, name, async (img): Promise<DrImageView> => {
    const info = await img.getMirrorInfo();
    const status = await img.getMirrorStatus();
    const local = status.siteStatuses.find((s) => s.mirrorUuid === '');
    let lastCopied: DrImageView['lastCopied'];
    let copying: DrImageView['copying'];
    for (const s of await img.listSnaps()) {
      if (s.namespace !== 'mirror') continue;
      const ns = await img.getSnapMirrorNamespace(s.id);
      if (ns.complete && (!lastCopied || ns.primarySnapId > lastCopied.primarySnapId)) lastCopied = { primarySnapId: ns.primarySnapId, drSnapId: s.id };
      if (!ns.complete) copying = { primarySnapId: ns.primarySnapId, objects: ns.lastCopiedObjectNumber };
    }
    return {
      present: true,
      state: info.state,
      primary: info.primary,
      globalId: info.globalId,
      ...(local ? { daemon: siteView(local) } : {}),
      ...(lastCopied ? { lastCopied } : {}),
      ...(copying ? { copying } : {}),
    };
  });
  return read ?? { present: false };
}
