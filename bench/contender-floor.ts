/**
 * Floor: one process, connections already open — virDomainFSFreeze, rbd_snap_create on every
 * disk (in parallel, images already open), virDomainFSThaw. No orchestration: the physical limit.
 */
import { nowMs } from './clock';
import type { Contender, RunTiming } from './contender';
import { timingOf } from './contender';
import { AGENT_TIMEOUT_SEC, ensureThawed, removeSnapIfAny } from './lab-context';
import type { Guest, LabContext } from './lab-context';

export function floorContender(ctx: LabContext): Contender {
  return {
    name: 'floor',
    async run(guest: Guest, tag: string): Promise<RunTiming> {
      const snap = `bench-floor-${tag}`;
      const callOpts = { timeoutMs: AGENT_TIMEOUT_SEC * 1000 + 2000 };
      let frozen = false;
      try {
        const freezeStartMs = nowMs();
        frozen = true; // a freeze that errors may still have landed: thaw in finally regardless
        const n = await ctx.libvirt.fsFreeze(guest.dom, undefined, callOpts);
        const frozeAt = nowMs();
        if (n === 0) throw new Error(`${guest.name}: freeze froze 0 filesystems`);
        await Promise.all(guest.images.map((img) => img.createSnap(snap)));
        const snappedAt = nowMs();
        await ctx.libvirt.fsThaw(guest.dom, undefined, callOpts);
        const thawReturnMs = nowMs();
        frozen = false;
        return timingOf(freezeStartMs, [['freeze', frozeAt], ['snapshot', snappedAt], ['thaw', thawReturnMs]]);
      } finally {
        if (frozen) await ensureThawed(ctx, guest);
        for (const img of guest.images) await removeSnapIfAny(img, snap);
      }
    },
  };
}
