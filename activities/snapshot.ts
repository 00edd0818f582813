import { ApplicationFailure } from '@temporalio/common';
import { monoMs, nowMs } from '../src/host/clock';
import { faultPoint } from '../src/host/fault-points';
import { FailureType } from '../src/model/failures';
import type { SnapshotDisksRequest, SnapshotDisksResult } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

/**
 * One user snapshot per disk (rbd_snap_create), all inside the one freeze. Group snapshots would
 * be atomic across images, but Ceph 16.2.15 cannot clone from them. The calls run in the
 * snapshotter process with a hard bound: on timeout that process is killed before librbd would
 * break a hung lock owner's lock and blocklist the VM.
 */
export function snapshotDisks(deps: ActivityDeps) {
  return async function snapshotDisks(req: SnapshotDisksRequest): Promise<SnapshotDisksResult> {
    const startedAt = nowMs();
    const startedMono = monoMs();
    const requests = req.snaps.map((s) => ({ pool: s.source.pool, namespace: s.source.namespace, image: s.source.image, snap: s.snap }));
    let outcome;
    try {
      outcome = await during('snapshot disks', () => deps.snapshotter.createSnaps(requests, { timeoutMs: req.timeoutMs }), {
        type: FailureType.SnapshotFailed,
        nonRetryable: true,
      });
    } catch (err) {
      deps.metrics.failures.inc({ step: 'snapshot' });
      throw err;
    }
    const returnedAt = nowMs();
    const returnedMono = monoMs();
    if (outcome.failed.length) {
      deps.metrics.failures.inc({ step: 'snapshot' });
      const what = outcome.failed.map((f) => `${f.request.pool}/${f.request.image}@${f.request.snap}: ${f.error.message}`).join('; ');
      throw ApplicationFailure.nonRetryable(`snapshot failed: ${what}`, FailureType.SnapshotFailed);
    }
    if (outcome.timedOut || outcome.mayCompleteLate.length || outcome.notSent.length) {
      deps.metrics.failures.inc({ step: 'snapshot-timeout' });
      throw ApplicationFailure.nonRetryable(
        `snapshot did not finish within ${req.timeoutMs} ms (image lock owner unresponsive or cluster unavailable); ` +
          'a late snapshot will be looked for and removed',
        FailureType.SnapshotTimeout,
      );
    }
    deps.metrics.snapshotDuration.observe((returnedAt - startedAt) / 1000);
    await faultPoint('snapshot:after');
    const perDiskMs = Object.fromEntries(req.snaps.map((s, i) => [s.target, outcome.replyMs.get(requests[i]!)!]));
    return { startedAt, returnedAt, startedMono, returnedMono, perDiskMs };
  };
}
