/**
 * Naive script: one process per step, as a shell script would run them — `virsh domfsfreeze`,
 * `rbd snap create` per disk (one after the other), `virsh domfsthaw`. Spawned with argv
 * arrays, never a shell string. The window is the freeze process's spawn → the thaw process's exit.
 */
import { run } from '../support/lab/cli-tools';
import { nowMs } from './clock';
import type { Contender, RunTiming } from './contender';
import { timingOf } from './contender';
import { ensureThawed, removeSnapIfAny } from './lab-context';
import type { Guest, LabContext } from './lab-context';

export function naiveContender(ctx: LabContext): Contender {
  return {
    name: 'naive',
    async run(guest: Guest, tag: string): Promise<RunTiming> {
      const snap = `bench-naive-${tag}`;
      let frozen = false;
      try {
        const freezeStartMs = nowMs();
        frozen = true;
        await run('virsh', [...ctx.virshArgs, 'domfsfreeze', guest.name], 30_000);
        const frozeAt = nowMs();
        for (const d of guest.disks) {
          await run('rbd', [...ctx.rbdArgs, 'snap', 'create', `${d.pool}/${d.image}@${snap}`], 30_000);
        }
        const snappedAt = nowMs();
        await run('virsh', [...ctx.virshArgs, 'domfsthaw', guest.name], 30_000);
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
