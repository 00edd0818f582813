import { Context } from '@temporalio/activity';
import { removeImage } from '../src/ceph';
import { faultMarker } from '../src/host/fault-points';
import { META } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { createClone } from './clone';
import { guardedFlatten } from './guarded-flatten';
import type { CloneRequest } from './clone';

export interface FlattenDetails {
  done: number;
  total: number;
  restarted: boolean;
}

/**
 * A snapshot image's flatten, through the one guarded flatten (guarded-flatten.ts: an
 * interrupted flatten is never re-run, the clone is made again), heartbeating and cancellable.
 */
export function flattenDisk(deps: ActivityDeps) {
  return async function flattenDisk(req: CloneRequest): Promise<{ ms: number; restarted: boolean; bytes: number }> {
    const ctx = Context.current();
    const { restarted, ms, bytes } = await guardedFlatten(deps, {
      io: await deps.ioctx(req.image.pool, req.image.namespace),
      image: req.image.image,
      startedKey: META.flattenStarted,
      remake: () => createClone(deps, req),
      kind: 'snapshot',
      workflowId: req.workflowId,
      target: req.target,
      onProgress: (done, total, again) => {
        ctx.heartbeat({ done, total, restarted: again } satisfies FlattenDetails);
        if (total > 0 && done / total >= 0.2) faultMarker('flatten:progress');
      },
      afterFlatten: (img) => img.setMetadata(META.state, 'flattened'),
    });
    return { ms, restarted, bytes };
  };
}

export { removeImage };
