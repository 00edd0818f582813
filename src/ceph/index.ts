/*
 * vmsnap's Ceph RBD client: a native addon over librbd/librados (native/, built by
 * scripts/build-addon.mjs) with a go-ceph-style facade, one topic per file.
 */
export { RadosCluster, IoCtx, type ConnectOptions } from './cluster';
export {
  RbdError, isNotFound, isExists, isBusy, isInvalid, isTimedOut, isCanceled, isNotEmpty,
  isPermissionDenied, isBlocklisted,
} from './errors';
export {
  Image, listImages, createImage, openImage, readImageIfExists, removeImage, imageExists,
  type ImageStat, type CreateImageOptions, type OpenImageOptions,
} from './image';
export type { SnapInfo } from './snapshot';
export { cloneImage, type CloneOptions, type ParentSpec, type ChildSpec } from './clone';
export type { FlattenOptions } from './flatten';
export type { LongCallOptions } from './long-call';
export {
  createGroup, removeGroup, addGroupImage, removeGroupImage, listGroupImages,
  createGroupSnap, listGroupSnaps, removeGroupSnap, type GroupImage, type GroupSnapInfo,
} from './group';
export { createNamespace, removeNamespace, namespaceExists } from './namespace';
export type { MirrorImageMode, MirrorInfo, MirrorSiteStatus, MirrorStatus, SnapMirrorNamespace, PoolMirrorMode, MirrorPeerSite } from './mirror';
export { getPoolMirrorMode, getPoolMirrorUuid, listMirrorPeers } from './mirror';
export {
  Snapshotter, type SnapRequest, type SnapshotterOptions, type BoundOptions,
  type CreateSnapsResult, type CreateMirrorSnapsResult, type MetadataWriteResult, type MirrorState, type RemoveSnapsResult, type SetUpResult, type SnapFailure,
} from './snapshotter';
export { SnapshotterPool, laneKey, type SnapshotterPoolOptions, type LaneOptions } from './snapshotter-pool';
export { setOmapValue, removeOmapKey, listOmapValues, type OmapTarget, type OmapCliOptions } from './omap-cli';
export { imageWatchers, imageLockers, removeImageCli, type ImageLocation } from './rbd-status-cli';
export { rbdVersion, addonThreadStats, addonHandleCounts, releaseFreedMemory, addonDrained } from './addon-runtime';
