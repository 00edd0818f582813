import type { ImageMirroring } from './image';

/*
 * What `vmsnap mirror enable|disable` does to one image, decided from what it is before anything is
 * changed: the steps (none when it already is what was asked: idempotent), or why it refuses.
 */

export type MirrorStep = 'exclusive-lock' | 'mirror-enable' | 'mirror-disable';
export type Plan = { steps: MirrorStep[] } | { refused: string };

/** Snapshot-mode mirroring, primary here; exclusive-lock first when the image lacks it. */
export function enablePlan(m: ImageMirroring): Plan {
  if (!m.exists) return { refused: 'no such image' };
  if (m.state === 'disabling') return { refused: 'its mirroring is being disabled (an earlier disable did not finish): run `vmsnap mirror disable` again, then enable' };
  if (m.state === 'enabled') {
    if (m.mode !== 'snapshot') return { refused: `mirrors in ${m.mode ?? 'unknown'} mode; vmsnap mirrors in snapshot mode: \`vmsnap mirror disable\` first` };
    if (!m.primary) return { refused: 'not primary here (a copy rbd-mirror keeps, or demoted): enable it where it is primary' };
    return { steps: [] };
  }
  return { steps: m.exclusiveLock ? ['mirror-enable'] : ['exclusive-lock', 'mirror-enable'] };
}

/** Mirroring off (its mirror snapshots go; rbd-mirror then removes the DR copy). Features stay. */
export function disablePlan(m: ImageMirroring): Plan {
  if (!m.exists) return { refused: 'no such image' };
  if (m.state === 'disabled') return { steps: [] };
  if (!m.primary && m.state === 'enabled') return { refused: 'not primary here (a copy rbd-mirror keeps, or demoted): disable it where it is primary' };
  return { steps: ['mirror-disable'] };
}

export const isRefused = (p: Plan): p is { refused: string } => 'refused' in p;
