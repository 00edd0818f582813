/**
 * Nova ordering: what wrapping RBD `direct_snapshot` in quiesce/unquiesce does — the clone and
 * its flatten happen while the guest is frozen. The guest's own disks are 64 MiB, so inside the
 * one freeze this contender does: snapshot of every guest disk (librbd, in parallel), a snapshot
 * of the 1 GiB stand-in image (big-image.ts), rbd_clone3 of that snapshot into the image pool,
 * rbd_flatten of the clone (1 GiB copied), and only then virDomainFSThaw. Connections are kept
 * open, as in a long-running nova-compute. Everything it creates is removed after the thaw.
 */
import { cloneImage, openImage } from '../src/ceph';
import type { Image, IoCtx } from '../src/ceph';
import type { BigImage } from './big-image';
import { nowMs } from './clock';
import type { Contender, RunTiming } from './contender';
import { timingOf } from './contender';
import { AGENT_TIMEOUT_SEC, ensureThawed, removeImageRetrying, removeSnapIfAny } from './lab-context';
import type { Guest, LabContext } from './lab-context';

export function novaContender(ctx: LabContext, big: BigImage, imagesIo: IoCtx): Contender {
  return {
    name: 'nova',
    async run(guest: Guest, tag: string): Promise<RunTiming> {
      const snap = `bench-nova-${tag}`;
      const cloneName = `bench-nova-clone-${tag}`;
      const callOpts = { timeoutMs: AGENT_TIMEOUT_SEC * 1000 + 2000 };
      let frozen = false;
      let clone: Image | undefined;
      let cloned = false;
      try {
        const freezeStartMs = nowMs();
        frozen = true;
        const n = await ctx.libvirt.fsFreeze(guest.dom, undefined, callOpts);
        const frozeAt = nowMs();
        if (n === 0) throw new Error(`${guest.name}: freeze froze 0 filesystems`);
        await Promise.all([...guest.images, big.image].map((img) => img.createSnap(snap)));
        const snappedAt = nowMs();
        await cloneImage(big.io, big.name, snap, imagesIo, cloneName);
        cloned = true;
        clone = await openImage(imagesIo, cloneName);
        const clonedAt = nowMs();
        await clone.flatten();
        const flattenedAt = nowMs();
        await ctx.libvirt.fsThaw(guest.dom, undefined, callOpts);
        const thawReturnMs = nowMs();
        frozen = false;
        return timingOf(freezeStartMs, [
          ['freeze', frozeAt],
          ['snapshot', snappedAt],
          ['clone', clonedAt],
          ['flatten', flattenedAt],
          ['thaw', thawReturnMs],
        ]);
      } finally {
        if (frozen) await ensureThawed(ctx, guest);
        await clone?.close().catch(() => undefined);
        if (cloned) await removeImageRetrying(imagesIo, cloneName);
        for (const img of [...guest.images, big.image]) await removeSnapIfAny(img, snap);
      }
    },
  };
}
