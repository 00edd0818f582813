import { existsSync } from 'node:fs';
import path from 'node:path';

/*
 * The compiled addon (native/*.cc, built by scripts/build-addon.mjs into build/Release).
 * Everything here is internal: use the typed facade in the sibling files.
 */

/** Opaque handle to a rados_t, rados_ioctx_t or rbd_image_t. */
export interface NativeHandle {
  readonly __nativeHandle: unique symbol;
}

type Maybe<T> = T | null | undefined;
export type ProgressFn = (done: number, total: number) => void;
/** A long call: its promise and a function that makes librbd's progress callback abort it. */
export type Cancellable = [Promise<void>, () => void];

export interface NativeStat {
  size: number;
  objSize: number;
  numObjs: number;
  order: number;
  blockNamePrefix: string;
}

// Named after the C call each export wraps, in librbd's word order (rbd_group_snap_create: groupSnapCreate), unlike the verb-noun facade.
export interface NativeBinding {
  version(): string;
  threadStats(): { threads: number; idle: number; queued: number };
  /** Native resources not yet released, process-wide (each open is released exactly once). */
  handleCounts(): { clusters: number; ioctxs: number; images: number };
  /** Test hook: the next rbd_close the addon makes reports -errno (after really closing). */
  injectCloseError(errno: number): void;
  /** malloc_trim(0); true when memory went back to the kernel. */
  trimMemory(): boolean;
  connect(conf: string, id: string, keyring: Maybe<string>, timeoutSec: Maybe<number>): Promise<NativeHandle>;
  shutdown(cluster: NativeHandle): Promise<void>;
  getAddrs(cluster: NativeHandle): Promise<string>;
  blocklistAdd(cluster: NativeHandle, addr: string, expireSec: number): Promise<void>;
  fsid(cluster: NativeHandle): Promise<string>;
  poolLookup(cluster: NativeHandle, pool: string): Promise<number>;
  ioctxCreate(cluster: NativeHandle, pool: string, namespace: Maybe<string>): Promise<NativeHandle>;
  ioctxDestroy(io: NativeHandle): Promise<void>;
  namespaceCreate(io: NativeHandle, name: string): Promise<void>;
  namespaceRemove(io: NativeHandle, name: string): Promise<void>;
  namespaceExists(io: NativeHandle, name: string): Promise<boolean>;

  listImages(io: NativeHandle): Promise<string[]>;
  createImage(io: NativeHandle, name: string, size: number, order: Maybe<number>, features: Maybe<bigint | number>): Promise<void>;
  openImage(io: NativeHandle, name: string, snap: Maybe<string>, readOnly: boolean): Promise<NativeHandle>;
  closeImage(image: NativeHandle): Promise<void>;
  removeImage(io: NativeHandle, name: string, onProgress: Maybe<ProgressFn>): Cancellable;
  imageExists(io: NativeHandle, name: string): Promise<boolean>;
  cloneImage(
    parentIo: NativeHandle, parentName: string, snap: string, childIo: NativeHandle, childName: string,
    features: Maybe<bigint | number>, order: Maybe<number>, format: Maybe<number>,
  ): Promise<void>;

  stat(image: NativeHandle): Promise<NativeStat>;
  features(image: NativeHandle): Promise<bigint>;
  updateFeatures(image: NativeHandle, features: bigint | number, enabled: boolean): Promise<void>;
  rebuildObjectMap(image: NativeHandle): Promise<void>;
  parent(image: NativeHandle): Promise<{ pool: string; namespace: string; image: string; snap: string; snapId: number; trash: boolean } | null>;
  snapList(image: NativeHandle): Promise<{ id: number; name: string; size: number; namespace: string }[]>;
  snapExists(image: NativeHandle, name: string): Promise<boolean>;
  snapCreate(image: NativeHandle, name: string): Promise<void>;
  snapRemove(image: NativeHandle, name: string): Promise<void>;
  snapProtect(image: NativeHandle, name: string): Promise<void>;
  snapUnprotect(image: NativeHandle, name: string): Promise<void>;
  snapIsProtected(image: NativeHandle, name: string): Promise<boolean>;
  listChildren(image: NativeHandle): Promise<{ pool: string; namespace: string; image: string; trash: boolean }[]>;
  metadataGet(image: NativeHandle, key: string): Promise<string | null>;
  metadataSet(image: NativeHandle, key: string, value: string): Promise<void>;
  metadataRemove(image: NativeHandle, key: string): Promise<void>;
  metadataList(image: NativeHandle): Promise<Record<string, string>>;
  read(image: NativeHandle, offset: number, len: number): Promise<Buffer>;
  write(image: NativeHandle, offset: number, buf: Buffer): Promise<number>;
  checksum(image: NativeHandle): Promise<string>;
  flatten(image: NativeHandle, onProgress: Maybe<ProgressFn>): Cancellable;

  groupCreate(io: NativeHandle, name: string): Promise<void>;
  groupRemove(io: NativeHandle, name: string): Promise<void>;
  groupImageAdd(groupIo: NativeHandle, group: string, imageIo: NativeHandle, image: string): Promise<void>;
  groupImageRemove(groupIo: NativeHandle, group: string, imageIo: NativeHandle, image: string): Promise<void>;
  groupImageList(io: NativeHandle, group: string): Promise<{ image: string; poolId: number; state: string }[]>;
  groupSnapCreate(io: NativeHandle, group: string, snap: string): Promise<void>;
  groupSnapRemove(io: NativeHandle, group: string, snap: string): Promise<void>;
  groupSnapList(io: NativeHandle, group: string): Promise<{ name: string; state: string }[]>;

  mirrorImageEnable(image: NativeHandle, mode: 'snapshot' | 'journal'): Promise<void>;
  mirrorImageDisable(image: NativeHandle, force: boolean): Promise<void>;
  mirrorImageGetInfo(image: NativeHandle): Promise<NativeMirrorInfo>;
  mirrorImageGetMode(image: NativeHandle): Promise<'journal' | 'snapshot'>;
  mirrorImageCreateSnapshot(image: NativeHandle): Promise<number>;
  mirrorImageGetGlobalStatus(image: NativeHandle): Promise<{
    name: string;
    info: NativeMirrorInfo;
    siteStatuses: { mirrorUuid: string; state: string; description: string; lastUpdate: number; up: boolean }[];
  }>;
  snapGetMirrorNamespace(image: NativeHandle, snapId: number): Promise<{
    state: string;
    mirrorPeerUuids: string[];
    complete: boolean;
    primaryMirrorUuid: string;
    primarySnapId: number;
    lastCopiedObjectNumber: number;
  }>;
  mirrorModeGet(io: NativeHandle): Promise<'disabled' | 'image' | 'pool'>;
  mirrorUuidGet(io: NativeHandle): Promise<string>;
  mirrorPeerSiteList(io: NativeHandle): Promise<{
    uuid: string;
    direction: string;
    siteName: string;
    mirrorUuid: string;
    clientName: string;
    lastSeen: number;
  }[]>;
}

export interface NativeMirrorInfo {
  globalId: string;
  state: 'disabling' | 'enabled' | 'disabled';
  primary: boolean;
}

const ADDON = path.join('build', 'Release', 'vmsnap_rbd.node');
/** Where `npm run release` puts the addon it prebuilt: the one platform a release is built for. */
export const PREBUILT_ADDON = path.join('prebuilds', 'linux-x64-glibc', 'vmsnap_rbd.node');

/**
 * Finds the addon in the nearest ancestor directory (works from src/ and dist/): a source
 * checkout's own build (build/Release), else an installed release's prebuilt copy.
 */
export function addonPath(): string {
  const override = process.env.VMSNAP_RBD_ADDON;
  if (override) return override;
  const prebuilt = process.platform === 'linux' && process.arch === 'x64' ? [PREBUILT_ADDON] : [];
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    for (const rel of [ADDON, ...prebuilt]) {
      const candidate = path.join(dir, rel);
      if (existsSync(candidate)) return candidate;
    }
    if (path.dirname(dir) === dir) break;
  }
  throw new Error(
    `vmsnap: native addon not found (${[ADDON, ...prebuilt].join(' or ')}); a release ships it prebuilt for linux-x64 ` +
      '(glibc); from a source checkout build it with `node scripts/build-addon.mjs` (needs apt packages librbd-dev librados-dev)',
  );
}

let loaded: NativeBinding | undefined;

/** Whether anything has loaded the addon yet (without loading it). */
export function nativeLoaded(): boolean {
  return loaded !== undefined;
}

/** The addon, loaded on first use. */
export function native(): NativeBinding {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  loaded ??= require(addonPath()) as NativeBinding;
  return loaded;
}
