import { native } from './native';

/** rbd_version: librbd's version, e.g. "1.16.0" (Ceph 16). Loads the addon. */
export function rbdVersion(): string {
  return native().version();
}

/** Threads the addon has started for blocking calls (never libuv's pool), and how many idle. */
export function addonThreadStats(): { threads: number; idle: number; queued: number } {
  return native().threadStats();
}

/** Returns the heap pages librbd/librados freed to the kernel (malloc_trim); true if any went. */
export function releaseFreedMemory(): boolean {
  return native().trimMemory();
}
