import { constants } from 'node:os';

/*
 * Errors from librbd/librados keep the C call's errno and name, like go-ceph's rbd errors:
 * `rbd_snap_create: EEXIST (17)`. Compare by errno with the helpers, never by message.
 */

// Linux's errno 108; Node's os.constants.errno leaves it out.
const ESHUTDOWN = 108;

const errnoNames = new Map<number, string>([
  ...Object.entries(constants.errno).map(([name, value]): [number, string] => [value, name]),
  [ESHUTDOWN, 'ESHUTDOWN'],
]);

export class RbdError extends Error {
  override readonly name = 'RbdError';
  /** Positive errno, e.g. 2 for ENOENT. */
  readonly errno: number;
  /** Symbolic errno, e.g. 'ENOENT'. */
  readonly code: string;
  /** The librbd/librados C call that failed, e.g. 'rbd_open'. */
  readonly call: string;

  constructor(errno: number, call: string, options?: { cause?: unknown }) {
    const e = Math.abs(errno);
    const code = errnoNames.get(e) ?? `E${e}`;
    super(`${call}: ${code} (${e})`, options);
    this.errno = e;
    this.code = code;
    this.call = call;
  }
}

interface NativeErrorShape {
  errno: number;
  call: string;
}

function isNativeError(e: unknown): e is Error & NativeErrorShape {
  return e instanceof Error && typeof (e as Partial<NativeErrorShape>).errno === 'number' &&
    typeof (e as Partial<NativeErrorShape>).call === 'string';
}

/** Awaits a native call and translates its rejection into an {@link RbdError}. */
export async function rbdCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (isNativeError(e) && !(e instanceof RbdError)) throw new RbdError(e.errno, e.call);
    throw e;
  }
}

function hasErrno(e: unknown, errno: number): boolean {
  return e instanceof RbdError && e.errno === errno;
}

/** ENOENT: no such image, snapshot, pool, group or key. */
export const isNotFound = (e: unknown): boolean => hasErrno(e, constants.errno.ENOENT);
/** EEXIST: the name is taken. */
export const isExists = (e: unknown): boolean => hasErrno(e, constants.errno.EEXIST);
/** EBUSY: in use (unprotect with children, image open elsewhere, handles still open). */
export const isBusy = (e: unknown): boolean => hasErrno(e, constants.errno.EBUSY);
/** EINVAL: e.g. flatten of an image without a parent. */
export const isInvalid = (e: unknown): boolean => hasErrno(e, constants.errno.EINVAL);
/** ETIMEDOUT: e.g. rados_connect past client_mount_timeout. */
export const isTimedOut = (e: unknown): boolean => hasErrno(e, constants.errno.ETIMEDOUT);
/** ECANCELED: a long call stopped through its AbortSignal. */
export const isCanceled = (e: unknown): boolean => hasErrno(e, constants.errno.ECANCELED);
/** ENOTEMPTY: e.g. removing an image that still has snapshots or linked clones. */
export const isNotEmpty = (e: unknown): boolean => hasErrno(e, constants.errno.ENOTEMPTY);
/** EPERM or EACCES: the cephx key lacks the capability (e.g. a pool outside its `profile rbd`). */
export const isPermissionDenied = (e: unknown): boolean =>
  hasErrno(e, constants.errno.EPERM) || hasErrno(e, constants.errno.EACCES);
/**
 * ESHUTDOWN: the cluster blocklisted this client (librados answers every later call so); only a
 * new connection, after the blocklist entry expires or is removed, gets through.
 */
export const isBlocklisted = (e: unknown): boolean => hasErrno(e, ESHUTDOWN);
