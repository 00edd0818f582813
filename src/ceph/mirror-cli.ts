import type { OmapCliOptions } from './omap-cli';
import { rbdCli } from './rbd-status-cli';
import type { ImageLocation } from './rbd-status-cli';

/*
 * Promotion and demotion on a DR site (rbd_mirror_image_promote/demote) through the `rbd` CLI, each
 * its own process with its own librados session, SIGKILLed at its deadline (as the omap and
 * rbd-status calls): they go through the image's exclusive-lock owner, and one CLI asks them rarely.
 * (The DR point record, written on every DR run, goes through the VM's snapshotter lane instead:
 * activities/dr-point.ts.)
 */

function spec(d: ImageLocation): string {
  return `${d.pool}/${d.namespace ? `${d.namespace}/` : ''}${d.image}`;
}

/**
 * rbd_mirror_image_promote through `rbd mirror image promote [--force]`. Without force it succeeds
 * only when the peer's primary was demoted and that demotion reached this copy; with force it
 * promotes a copy whose primary is lost (or still primary: a split brain).
 */
export async function promoteImageCli(o: OmapCliOptions, d: ImageLocation, force: boolean): Promise<void> {
  await rbdCli(o, ['mirror', 'image', 'promote', ...(force ? ['--force'] : []), spec(d)], `rbd mirror image promote${force ? ' --force' : ''} ${spec(d)}`);
}

/** rbd_mirror_image_demote through `rbd mirror image demote`. */
export async function demoteImageCli(o: OmapCliOptions, d: ImageLocation): Promise<void> {
  await rbdCli(o, ['mirror', 'image', 'demote', spec(d)], `rbd mirror image demote ${spec(d)}`);
}
