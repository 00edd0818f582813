/**
 * Workflow bundle of the load test's worker: vmsnap's real workflows plus one bench-only
 * workflow for RBD-only targets. Workflow code: no side-effecting imports.
 */
import { proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { bulkTaskQueue } from '../src/model/naming';
import type { RbdLocation } from '../src/model/types';

export { consistentSnapshot, domainLock } from '../workflows';

export interface RbdOnlyRequest {
  source: RbdLocation;
  /** Must start with `vmsnap-` (vmsnap's cleanup only touches its own snapshot names). */
  snap: string;
  image: RbdLocation;
}

/**
 * The RBD half of consistentSnapshot for an image no VM uses (nothing to freeze): the same
 * activities on the same worker — snapshotDisks as a local activity through the snapshotter
 * process, then cloneDisk, flattenDisk (heartbeating), finalizeDisk — with the same cleanup
 * activities on failure. It exists so that 50 snapshot workflows can be in flight on one worker
 * while the lab has only two guests with an agent (one snapshot per VM at a time).
 */
export async function rbdOnlySnapshot(req: RbdOnlyRequest): Promise<{ bytes?: number }> {
  const { workflowId } = workflowInfo();
  const local = proxyLocalActivities<Activities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 1 } });
  // The copy steps on the host's bulk queue, as consistentSnapshot runs them.
  const ops = proxyActivities<Activities>({ taskQueue: bulkTaskQueue(workflowInfo().taskQueue), startToCloseTimeout: '10m', heartbeatTimeout: '30s', retry: { maximumAttempts: 3, initialInterval: '1s' } });
  const snaps = [{ target: 'vdb', source: req.source, snap: req.snap }];
  const copy = { workflowId, domain: 'bench-rbd-only', target: 'vdb', source: req.source, snap: req.snap, image: req.image, labels: {} };
  await local.snapshotDisks({ snaps, timeoutMs: 8000 });
  try {
    await ops.cloneDisk(copy);
    await ops.flattenDisk(copy);
    return await ops.finalizeDisk({ source: req.source, snap: req.snap, image: req.image, quiesced: false });
  } catch (err) {
    await ops.removeImages({ workflowId, images: [{ image: req.image, source: req.source, snap: req.snap }] });
    await ops.removeSourceSnaps({ snaps: [{ source: req.source, snap: req.snap }] });
    throw err;
  }
}
