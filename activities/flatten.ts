import { Context } from '@temporalio/activity';
import { openImage, removeImage } from '../src/ceph';
import { nowMs } from '../src/host/clock';
import { faultMarker } from '../src/host/fault-points';
import { META } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { createClone } from './clone';
import type { CloneRequest } from './clone';
import { during } from './step-error';

export interface FlattenDetails {
  done: number;
  total: number;
  restarted: boolean;
}

/**
 * rbd_flatten_with_progress with heartbeats and operator cancel. A flatten that was interrupted
 * (worker killed, cancelled) is never simply re-run: on Ceph 16.2.15 that returns success with
 * objects reading as zeros (tracker 68998). The marker written before flattening tells a later
 * attempt to delete the half-flattened clone and clone again.
 */
export function flattenDisk(deps: ActivityDeps) {
  return async function flattenDisk(req: CloneRequest): Promise<{ ms: number; restarted: boolean; bytes: number }> {
    const ctx = Context.current();
    const io = await deps.ioctx(req.image.pool, req.image.namespace);
    let restarted = false;
    let img = await during('open clone', () => openImage(io, req.image.image));
    if (!(await img.parent())) {
      await img.close();
      return { ms: 0, restarted, bytes: 0 };
    }
    if ((await img.getMetadata(META.flattenStarted)) !== null) {
      await img.close();
      ctx.heartbeat({ done: 0, total: 0, restarted: true } satisfies FlattenDetails);
      await during('remove interrupted clone', () => removeImage(io, req.image.image));
      await createClone(deps, req);
      img = await openImage(io, req.image.image);
      restarted = true;
    }
    const started = nowMs();
    try {
      const { size } = await img.stat();
      await img.setMetadata(META.flattenStarted, new Date().toISOString());
      let lastReport = 0;
      await during(`flatten ${req.image.image}`, () =>
        img.flatten({
          signal: ctx.cancellationSignal,
          onProgress: (done, total) => {
            ctx.heartbeat({ done, total, restarted } satisfies FlattenDetails);
            if (total > 0 && done / total >= 0.2) faultMarker('flatten:progress');
            const t = Date.now();
            if (deps.reportProgress && t - lastReport > 1000) {
              lastReport = t;
              void deps.reportProgress(req.workflowId, { target: req.target, done, total }).catch(() => undefined);
            }
          },
        }),
      );
      await img.removeMetadata(META.flattenStarted);
      await img.setMetadata(META.state, 'flattened');
      const ms = nowMs() - started;
      deps.metrics.flattenDuration.observe({ kind: 'snapshot' }, ms / 1000);
      deps.metrics.flattenSize.observe({ kind: 'snapshot' }, size);
      return { ms, restarted, bytes: size };
    } finally {
      await img.close();
    }
  };
}

export { removeImage };
