import { patched } from '@temporalio/workflow';
import type { Capture } from '../src/model/snapshot-result';
import type { MirrorResult, SnapshotPlan } from '../src/model/types';
import { mirrorWait } from './activity-profiles';
import type { RunContext } from './run-context';

/** Histories from before DR mode (docs/versioning.md); only runs with target.mirror ask for it. */
export const DR_MIRROR = 'vmsnap-dr-mirror';

/**
 * DR mode (docs/dr.md), right after the thaw and before the copies: mirror snapshots carry the
 * run's snapshots to the DR site, and the run waits until they are there. Before the copies
 * because a copy's finalize removes its source snapshot, which rbd-mirror must have copied by
 * then. Undefined for a run without target.mirror.
 */
export async function mirrorToDrSite(ctx: RunContext, plan: SnapshotPlan, capture: Capture): Promise<MirrorResult | undefined> {
  const { input } = ctx;
  const mirror = input.target.mirror;
  if (!mirror || !patched(DR_MIRROR)) return undefined;
  const disks = plan.disks.map((d) => ({ target: d.target, source: d.source, snap: d.sourceSnap }));
  // The point in time is the freeze's start: the guest's state from then on is what the snapshots hold.
  const pointAt = capture.freeze?.startedAt ?? capture.snapshot.startedAt;
  return mirrorWait(mirror.waitMs).mirrorToDrSite.executeWithOptions({ summary: `carry ${disks.length} snapshot(s) to the DR site` }, [
    {
      disks,
      pointAt,
      snapshotTimeoutMs: input.snapshotTimeoutMs,
      waitMs: mirror.waitMs,
      record: { workflowId: ctx.id.nameId, runId: ctx.id.runId, domain: plan.domain, quiesced: capture.quiesced },
    },
  ]);
}
