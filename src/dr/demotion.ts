import { isNotFound, openImage } from '../ceph';
import type { IoCtx } from '../ceph';

/*
 * A planned failover (`dr-restore --planned`, docs/dr.md#planned-failover), as Ceph documents it:
 * the primary's images demoted, then promoted on the DR site without force — which librbd allows
 * only once rbd-mirror has copied the demotion there. Demoting an image takes a mirror snapshot in
 * state primary-demoted; its complete copy on the DR site is a non-primary-demoted one.
 */

/**
 * Whether the newest mirror snapshot of the DR site's copy `image` is the complete copy of its
 * primary's demotion: librbd's own condition for a promotion without force (an older one, from an
 * earlier failover, does not count).
 */
export async function demotionCopied(io: IoCtx, image: string): Promise<boolean> {
  let img;
  try {
    img = await openImage(io, image, { readOnly: true });
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
  try {
    const newest = (await img.listSnaps()).filter((s) => s.namespace === 'mirror').sort((a, b) => b.id - a.id)[0];
    if (!newest) return false;
    const ns = await img.getSnapMirrorNamespace(newest.id);
    return ns.state === 'non-primary-demoted' && ns.complete;
  } finally {
    await img.close();
  }
}

/**
 * Looks every `pollMs` until every image has the demotion's copy, at most `timeoutMs`; returns
 * the images still without it (none: every copy may be promoted plainly).
 */
export async function waitDemotionCopied(io: IoCtx, images: string[], timeoutMs: number, pollMs = 500): Promise<string[]> {
  const until = Date.now() + timeoutMs;
  let left = images;
  for (;;) {
    const seen = await Promise.all(left.map((i) => demotionCopied(io, i)));
    left = left.filter((_, k) => !seen[k]);
    if (!left.length || Date.now() >= until) return left;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
