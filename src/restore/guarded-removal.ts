import { imageLockers, imageWatchers, isBusy, isNotEmpty, removeImageCli } from '../ceph';
import type { ImageLocation, OmapCliOptions } from '../ceph';

/*
 * The one way vmsnap removes a disk it once gave to a VM (the orphan reaper's leftovers, the
 * disks `restore --confirm` lets go): Ceph is asked who has it open (watchers) and who holds its
 * lock (the exclusive-lock owner, alive or dead; advisory lockers) right before; anyone, or no
 * answer, keeps it. The removal is `rbd rm` in its own process, killed at 10 s: librbd breaks an
 * owner's lock only once that owner's watch has been gone ~30 s, so a removal that found no
 * locker and cannot live past 10 s never breaks one (src/ceph/rbd-status-cli.ts).
 */

/** Below librbd's ~30 s before it breaks the lock of an owner that stopped answering. */
const REMOVE_BOUND_MS = 10_000;

/** Removes the image unless someone holds it; returns why it was kept, or undefined once removed. */
export async function removeUnlessHeld(cli: OmapCliOptions, loc: ImageLocation): Promise<string | undefined> {
  return (await heldBy(cli, loc)) ?? (await removeIfUnused(cli, loc));
}

/** Why Ceph says the disk must stay (open, locked, or no answer); undefined when nobody holds it. */
async function heldBy(cli: OmapCliOptions, loc: ImageLocation): Promise<string | undefined> {
  try {
    const watchers = await imageWatchers(cli, loc);
    if (watchers.length) return `open by ${watchers.join(', ')} (watchers)`;
    const lockers = await imageLockers(cli, loc);
    if (lockers.length) return `locked by ${lockers.join(', ')}`;
    return undefined;
  } catch (err) {
    return `cannot tell who holds it (${(err as Error).message})`;
  }
}

/** `rbd rm`, which also refuses an image with snapshots, clones or a watcher that appeared meanwhile. */
async function removeIfUnused(cli: OmapCliOptions, loc: ImageLocation): Promise<string | undefined> {
  try {
    await removeImageCli({ ...cli, timeoutMs: Math.min(cli.timeoutMs ?? REMOVE_BOUND_MS, REMOVE_BOUND_MS) }, loc);
    return undefined;
  } catch (err) {
    if (isNotEmpty(err)) return 'has snapshots or clones';
    if (isBusy(err)) return 'opened meanwhile (watchers)';
    return `not removed: ${(err as Error).message}`;
  }
}
