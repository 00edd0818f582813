import { isCancellation, log } from '@temporalio/workflow';
import type { SnapshotInput } from '../src/model/input';
import type { SnapshotPlan, SnapshotResult } from '../src/model/types';
import { retention } from './activity-profiles';
import { messageOf } from './failure-of';
import type { Progress } from './progress';

/**
 * After a successful image-mode run of a schedule: prune that schedule's older images of this
 * domain down to its policy. The run's own images are pinned. A retention failure does not undo
 * a good snapshot: it is logged and reported in the result, and the next run tries again.
 */
export async function applyRetentionPolicy(
  input: SnapshotInput,
  plan: SnapshotPlan,
  result: SnapshotResult,
  progress: Progress,
): Promise<SnapshotResult> {
  const policy = input.retention;
  const scheduleId = input.labels.schedule;
  if (!policy || !scheduleId || !plan.clone) return result;
  progress.phase('retention');
  const keepImages = plan.disks.flatMap((d) => (d.image ? [d.image.image] : []));
  try {
    const r = await retention().applyRetention.executeWithOptions({ summary: `retention of schedule ${scheduleId}` }, [
      { pool: input.target.pool, scheduleId, domain: plan.domain.name, domainUuid: plan.domain.uuid, policy, keepImages },
    ]);
    return { ...result, retention: r };
  } catch (err) {
    if (isCancellation(err)) throw err;
    log.warn('retention failed; the snapshot stands, the next run retries', { schedule: scheduleId, error: messageOf(err) });
    return { ...result, retention: { kept: [], pruned: [], skipped: [], error: messageOf(err) } };
  }
}
