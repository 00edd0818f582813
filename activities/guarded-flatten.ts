import { Context } from '@temporalio/activity';
import { openImage, removeImage } from '../src/ceph';
import type { Image, IoCtx } from '../src/ceph';
import { nowMs } from '../src/host/clock';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

export interface GuardedFlatten {
  io: IoCtx;
  image: string;
  /** The metadata key that says a flatten of this clone began (the snapshot's and the restore's differ). */
  startedKey: string;
  /** Clone it again, from scratch, with everything the first clone carried. */
  remake(): Promise<void>;
  kind: 'snapshot' | 'restore';
  workflowId: string;
  target: string;
  /** Each progress report (the activity's heartbeat); `restarted` when the clone was made again first. */
  onProgress(done: number, total: number, restarted: boolean): void;
  /** Written on the clone after its flatten finished, before it is closed. */
  afterFlatten?(img: Image): Promise<void>;
}

export interface Flattened {
  /** False when the clone had no parent: an earlier attempt finished it. */
  flattened: boolean;
  restarted: boolean;
  ms: number;
  bytes: number;
}

/**
 * The one flatten of a clone, for snapshot images and restored disks alike. An interrupted
 * flatten (worker killed, cancelled) is never simply run again: on Ceph 16.2.15 that returns
 * success with objects reading as zeros (tracker 68998). A marker is written before each flatten
 * and removed after it; a later attempt that finds it removes the half-flattened clone and
 * clones again. Heartbeats and cancellation come from the running activity.
 */
export async function guardedFlatten(deps: ActivityDeps, g: GuardedFlatten): Promise<Flattened> {
  const ctx = Context.current();
  let restarted = false;
  let img = await during(`open ${g.image}`, () => openImage(g.io, g.image));
  try {
    if (!(await img.parent())) return { flattened: false, restarted, ms: 0, bytes: 0 };
    if ((await img.getMetadata(g.startedKey)) !== null) {
      await img.close();
      g.onProgress(0, 0, true);
      await during('remove interrupted clone', () => removeImage(g.io, g.image));
      await g.remake();
      img = await openImage(g.io, g.image);
      restarted = true;
    }
    const { size } = await img.stat();
    await img.setMetadata(g.startedKey, new Date().toISOString());
    const started = nowMs();
    let lastReport = 0;
    const current = img;
    await during(`flatten ${g.image}`, () =>
      current.flatten({
        signal: ctx.cancellationSignal,
        onProgress: (done, total) => {
          g.onProgress(done, total, restarted);
          const t = Date.now();
          if (deps.reportProgress && t - lastReport > 1000) {
            lastReport = t;
            void deps.reportProgress(g.workflowId, { target: g.target, done, total }).catch(() => undefined);
          }
        },
      }),
    );
    await img.removeMetadata(g.startedKey);
    await g.afterFlatten?.(img);
    const ms = nowMs() - started;
    deps.metrics.flattenDuration.observe({ kind: g.kind }, ms / 1000);
    deps.metrics.flattenSize.observe({ kind: g.kind }, size);
    return { flattened: true, restarted, ms, bytes: size };
  } finally {
    await img.close();
  }
}
