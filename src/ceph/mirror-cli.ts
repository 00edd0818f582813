import type { OmapCliOptions } from './omap-cli';
import { rbdCli } from './rbd-status-cli';
import type { ImageLocation } from './rbd-status-cli';

/*
 * Image calls that go through an image's exclusive-lock owner, made through the `rbd` CLI, each
 * its own process with its own librados session, SIGKILLed at its deadline (as the omap and
 * rbd-status calls): the record a DR run writes on a live image (the owner is the VM's QEMU), and
 * promotion/demotion on a DR site (rbd_mirror_image_promote/demote), asked rarely, by one CLI.
 */


function spec(d: ImageLocation): string {
  return `${d.pool}/${d.namespace ? `${d.namespace}/` : ''}${d.image}`;
}

/** rbd_metadata_set through `rbd image-meta set` (the value goes as an argument: no secrets in it). */
export async function setImageMetaCli(o: OmapCliOptions, d: ImageLocation, key: string, value: string): Promise<void> {
  await rbdCli(o, ['image-meta', 'set', spec(d), key, value], `rbd image-meta set ${spec(d)} ${key}`);
}

/** rbd_metadata_remove through `rbd image-meta remove`. */
export async function removeImageMetaCli(o: OmapCliOptions, d: ImageLocation, key: string): Promise<void> {
  await rbdCli(o, ['image-meta', 'remove', spec(d), key], `rbd image-meta remove ${spec(d)} ${key}`);
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
