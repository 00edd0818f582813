import type { IoCtx } from './cluster';
import { listChildren, parent, type ChildSpec, type ParentSpec } from './clone';
import { isNotFound, rbdCall } from './errors';
import { flatten, type FlattenOptions } from './flatten';
import { runLongCall, type LongCallOptions } from './long-call';
import { getMetadata, listMetadata, removeMetadata, setMetadata } from './metadata';
import {
  createMirrorSnap, disableMirroring, enableMirroring, getMirrorInfo, getMirrorMode, getMirrorStatus,
  getSnapMirrorNamespace, type MirrorImageMode, type MirrorInfo, type MirrorStatus, type SnapMirrorNamespace,
} from './mirror';
import { native, type NativeHandle } from './native';
import {
  createSnap, isSnapProtected, listSnaps, protectSnap, removeSnap, snapExists, unprotectSnap,
  type SnapInfo,
} from './snapshot';

/*
 * Images: create, open, remove, and the Image handle. Snapshot, clone, flatten and metadata
 * calls live in their own files; the Image methods below only forward to them.
 */

export interface ImageStat {
  size: number;
  objSize: number;
  numObjs: number;
  order: number;
}

export interface CreateImageOptions {
  /** Object size as a power of two (22 = 4 MiB). */
  order?: number;
  /** RBD_FEATURE_* bits; librbd's default (rbd_default_features) when absent. */
  features?: bigint | number;
}

export interface OpenImageOptions {
  /** Open at this snapshot (read-only view of its content). */
  snap?: string;
  readOnly?: boolean;
}

export class Image {
  private closing: Promise<void> | undefined;

  /** @internal */
  constructor(
    /** @internal */ readonly handle: NativeHandle,
    readonly io: IoCtx,
    readonly name: string,
    readonly snap: string | undefined,
  ) {}

  /** rbd_close. Idempotent; waits for calls in flight on this handle. */
  close(): Promise<void> {
    this.closing ??= rbdCall(() => native().closeImage(this.handle));
    return this.closing;
  }

  /** rbd_stat. */
  async stat(): Promise<ImageStat> {
    const s = await rbdCall(() => native().stat(this.handle));
    return { size: s.size, objSize: s.objSize, numObjs: s.numObjs, order: s.order };
  }

  /** rbd_get_features. */
  features(): Promise<bigint> {
    return rbdCall(() => native().features(this.handle));
  }

  /** rbd_update_features. */
  updateFeatures(features: bigint | number, enabled: boolean): Promise<void> {
    return rbdCall(() => native().updateFeatures(this.handle, features, enabled));
  }

  /** rbd_rebuild_object_map. */
  rebuildObjectMap(): Promise<void> {
    return rbdCall(() => native().rebuildObjectMap(this.handle));
  }

  /** rbd_read2: up to `len` bytes (fewer at the end of the image). */
  read(offset: number, len: number): Promise<Buffer> {
    return rbdCall(() => native().read(this.handle, offset, len));
  }

  /** rbd_write2: returns the number of bytes written. */
  write(offset: number, buf: Buffer): Promise<number> {
    return rbdCall(() => native().write(this.handle, offset, buf));
  }

  /**
   * SHA-256 (hex) of the whole image, or of the snapshot it was opened at: pipelined
   * rbd_aio_read of 4 MiB chunks hashed on an addon thread. Holes read as zeros.
   */
  checksum(): Promise<string> {
    return rbdCall(() => native().checksum(this.handle));
  }

  parent(): Promise<ParentSpec | null> { return parent(this); }
  listChildren(): Promise<ChildSpec[]> { return listChildren(this); }
  listSnaps(): Promise<SnapInfo[]> { return listSnaps(this); }
  snapExists(name: string): Promise<boolean> { return snapExists(this, name); }
  createSnap(name: string): Promise<void> { return createSnap(this, name); }
  removeSnap(name: string): Promise<void> { return removeSnap(this, name); }
  protectSnap(name: string): Promise<void> { return protectSnap(this, name); }
  unprotectSnap(name: string): Promise<void> { return unprotectSnap(this, name); }
  isSnapProtected(name: string): Promise<boolean> { return isSnapProtected(this, name); }
  getMetadata(key: string): Promise<string | null> { return getMetadata(this, key); }
  setMetadata(key: string, value: string): Promise<void> { return setMetadata(this, key, value); }
  listMetadata(): Promise<Record<string, string>> { return listMetadata(this); }
  removeMetadata(key: string): Promise<void> { return removeMetadata(this, key); }
  flatten(o?: FlattenOptions): Promise<void> { return flatten(this, o); }
  enableMirroring(mode: MirrorImageMode): Promise<void> { return enableMirroring(this, mode); }
  disableMirroring(o?: { force?: boolean }): Promise<void> { return disableMirroring(this, o); }
  getMirrorInfo(): Promise<MirrorInfo> { return getMirrorInfo(this); }
  getMirrorMode(): Promise<MirrorImageMode> { return getMirrorMode(this); }
  createMirrorSnap(): Promise<number> { return createMirrorSnap(this); }
  getMirrorStatus(): Promise<MirrorStatus> { return getMirrorStatus(this); }
  getSnapMirrorNamespace(snapId: number): Promise<SnapMirrorNamespace> { return getSnapMirrorNamespace(this, snapId); }
}

/** rbd_list2: image names in the pool/namespace of `io`. */
export function listImages(io: IoCtx): Promise<string[]> {
  return rbdCall(() => native().listImages(io.handle));
}

/** rbd_create4 (format 2). */
export function createImage(io: IoCtx, name: string, sizeBytes: number, o: CreateImageOptions = {}): Promise<void> {
  return rbdCall(() => native().createImage(io.handle, name, sizeBytes, o.order, o.features));
}

/** rbd_open, or rbd_open_read_only when `readOnly`; at snapshot `snap` when given. */
export async function openImage(io: IoCtx, name: string, o: OpenImageOptions = {}): Promise<Image> {
  const handle = await rbdCall(() => native().openImage(io.handle, name, o.snap, o.readOnly ?? false));
  return new Image(handle, io, name, o.snap);
}

/**
 * Opens read-only, runs `read`, closes. null when the image vanished since it was listed (an
 * image pool is listed, then each image read: a retention or restore may remove one in between).
 */
export async function readImageIfExists<T>(io: IoCtx, name: string, read: (img: Image) => Promise<T>): Promise<T | null> {
  let img: Image;
  try {
    img = await openImage(io, name, { readOnly: true });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
  try {
    return await read(img);
  } finally {
    await img.close();
  }
}

/**
 * rbd_remove_with_progress. Fails ENOTEMPTY (39) while the image has snapshots or linked
 * clones, EBUSY while another client has it open.
 */
export function removeImage(io: IoCtx, name: string, o: LongCallOptions = {}): Promise<void> {
  return runLongCall('rbd_remove_with_progress', (cb) => native().removeImage(io.handle, name, cb), o);
}

/** rbd_open_read_only + rbd_close: false on ENOENT. */
export async function imageExists(io: IoCtx, name: string): Promise<boolean> {
  try {
    return await rbdCall(() => native().imageExists(io.handle, name));
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}
