import type { IoCtx } from './cluster';
import { rbdCall } from './errors';
import type { Image } from './image';
import { native } from './native';

/*
 * RBD image mirroring (rbd-mirror, snapshot or journal mode). On a live image, enable, disable and
 * createMirrorSnap are snapshot operations that go through the exclusive-lock owner (enable takes
 * the first mirror snapshot, disable removes them): they block while that owner does not answer,
 * as rbd_snap_create does. Run them there through Snapshotter, which bounds them.
 */

export type MirrorImageMode = 'snapshot' | 'journal';

export interface MirrorInfo {
  /** The image's id across clusters: the same on the primary and its non-primary copies. */
  globalId: string;
  state: 'disabling' | 'enabled' | 'disabled';
  /** True on the side writes go to; false on a copy rbd-mirror keeps. */
  primary: boolean;
}

export interface MirrorSiteStatus {
  /** Empty for the local site; else the peer site's mirror uuid. */
  mirrorUuid: string;
  /** 'replaying', 'syncing', 'stopped', 'error', 'unknown', ... */
  state: string;
  description: string;
  /** Seconds since the epoch; 0 when nothing was reported. */
  lastUpdate: number;
  up: boolean;
}

export interface MirrorStatus {
  name: string;
  info: MirrorInfo;
  siteStatuses: MirrorSiteStatus[];
}

/** What a snapshot in the mirror namespace is (rbd_snap_mirror_namespace_t). */
export interface SnapMirrorNamespace {
  state: 'primary' | 'primary-demoted' | 'non-primary' | 'non-primary-demoted' | 'unknown';
  /** On a primary snapshot: the peers that still have to copy it. */
  mirrorPeerUuids: string[];
  /** On a non-primary snapshot: every object of it was copied. */
  complete: boolean;
  /** On a non-primary snapshot: the primary pool's mirror uuid and the primary snapshot's id it copies. */
  primaryMirrorUuid: string;
  primarySnapId: number;
  lastCopiedObjectNumber: number;
}

/** rbd_mirror_image_enable2: snapshot mode takes the first mirror snapshot now. */
export function enableMirroring(image: Image, mode: MirrorImageMode): Promise<void> {
  return rbdCall(() => native().mirrorImageEnable(image.handle, mode));
}

/** rbd_mirror_image_disable: on a primary image, removes its mirror snapshots. */
export function disableMirroring(image: Image, o: { force?: boolean } = {}): Promise<void> {
  return rbdCall(() => native().mirrorImageDisable(image.handle, o.force ?? false));
}

/** rbd_mirror_image_get_info. `state: 'disabled'` for an image (or pool) that does not mirror. */
export function getMirrorInfo(image: Image): Promise<MirrorInfo> {
  return rbdCall(() => native().mirrorImageGetInfo(image.handle));
}

/**
 * rbd_mirror_image_get_mode. Meaningful only for an image {@link getMirrorInfo} says is enabled:
 * one that does not mirror answers 'journal' (librbd's zero value), not an error.
 */
export function getMirrorMode(image: Image): Promise<MirrorImageMode> {
  return rbdCall(() => native().mirrorImageGetMode(image.handle));
}

/** rbd_mirror_image_create_snapshot: the new mirror snapshot's id (snapshot mode, primary only). */
export function createMirrorSnap(image: Image): Promise<number> {
  return rbdCall(() => native().mirrorImageCreateSnapshot(image.handle));
}

/** rbd_mirror_image_get_global_status: what each site's rbd-mirror last reported for the image. */
export function getMirrorStatus(image: Image): Promise<MirrorStatus> {
  return rbdCall(() => native().mirrorImageGetGlobalStatus(image.handle));
}

/** rbd_snap_get_mirror_namespace. EINVAL for a snapshot outside the mirror namespace. */
export async function getSnapMirrorNamespace(image: Image, snapId: number): Promise<SnapMirrorNamespace> {
  const ns = await rbdCall(() => native().snapGetMirrorNamespace(image.handle, snapId));
  return { ...ns, state: ns.state as SnapMirrorNamespace['state'] };
}

/** A pool's mirror mode: `image` mirrors only the images enabled one by one, `pool` every journaled one. */
export type PoolMirrorMode = 'disabled' | 'image' | 'pool';

/** One peer site of a pool (rbd_mirror_peer_site_t). */
export interface MirrorPeerSite {
  uuid: string;
  /** `tx-only` on the primary side for a peer that pulls from it (rbd-mirror registered itself). */
  direction: 'rx-only' | 'tx-only' | 'rx-tx' | 'unknown';
  siteName: string;
  /** The peer site's mirror uuid: what its statuses and its mirror snapshots' peers name it by. Empty until its rbd-mirror registered. */
  mirrorUuid: string;
  clientName: string;
  /** Seconds since the epoch when the peer's daemon last pinged; 0 when never. */
  lastSeen: number;
}

/** rbd_mirror_mode_get: the pool's (or, on a namespace's IoCtx, the namespace's) mirror mode. */
export function getPoolMirrorMode(io: IoCtx): Promise<PoolMirrorMode> {
  return rbdCall(() => native().mirrorModeGet(io.handle));
}

/** rbd_mirror_uuid_get: this pool's own mirror uuid. ENOENT while the pool does not mirror. */
export function getPoolMirrorUuid(io: IoCtx): Promise<string> {
  return rbdCall(() => native().mirrorUuidGet(io.handle));
}

/** rbd_mirror_peer_site_list: the pool's peer sites. */
export async function listMirrorPeers(io: IoCtx): Promise<MirrorPeerSite[]> {
  const peers = await rbdCall(() => native().mirrorPeerSiteList(io.handle));
  return peers.map((p) => ({ ...p, direction: p.direction as MirrorPeerSite['direction'] }));
}
