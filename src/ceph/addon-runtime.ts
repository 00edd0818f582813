/**
 * The addon process-wide: the librbd it loaded, its own threads, native handles still live, freed
 * heap handed back, and whether any call is still inside Ceph (a process must wait for that).
 */
import { native, nativeLoaded } from './native';

/** rbd_version: librbd's version, e.g. "1.16.0" (Ceph 16). Loads the addon. */
export function rbdVersion(): string {
  return native().version();
}

/** Threads the addon has started for blocking calls (never libuv's pool), and how many idle. */
export function addonThreadStats(): { threads: number; idle: number; queued: number } {
  return native().threadStats();
}

/**
 * Native resources (connections, ioctxs, open images) not yet released, process-wide, including
 * handles the garbage collector dropped whose release is still running on an addon thread.
 */
export function addonHandleCounts(): { clusters: number; ioctxs: number; images: number } {
  return native().handleCounts();
}

/** Returns the heap pages librbd/librados freed to the kernel (malloc_trim); true if any went. */
export function releaseFreedMemory(): boolean {
  return native().trimMemory();
}

/**
 * Waits (up to `timeoutMs`) until no addon call runs or waits. A process must not exit while a
 * librados/librbd call is inside Ceph: exit's static destructors pull Ceph's state from under it
 * (SIGABRT/SIGSEGV). True when idle, or when the addon was never loaded.
 */
export async function addonDrained(timeoutMs: number): Promise<boolean> {
  if (!nativeLoaded()) return true;
  for (const until = Date.now() + timeoutMs; ; ) {
    const s = native().threadStats();
    if (s.queued === 0 && s.idle === s.threads) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
}
