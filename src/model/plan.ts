import { FailureType } from './failures';
import type { SnapshotInput } from './input';
import { RBD_NAME } from './input';
import { defaultImageName, runKeyFor, sourceSnapName } from './naming';
import type { RunKeyScheme } from './naming';
import type { DiskPlan, InspectResult, SnapshotPlan } from './types';

export type PlanOutcome = { ok: true; plan: SnapshotPlan } | { ok: false; type: FailureType; message: string };

/**
 * Decides, before anything changes, which disks are snapshotted, under which names, and whether
 * the guest is frozen. Pure: it runs inside the workflow on the inspect activity's findings.
 */
export function planSnapshot(input: SnapshotInput, found: InspectResult, workflowId: string, scheme: RunKeyScheme = 'readable'): PlanOutcome {
  const runKey = runKeyFor(workflowId, scheme);
  const byTarget = new Map(found.disks.map((d) => [d.target, d]));
  const skipped: { target: string; reason: string }[] = [];
  const chosen = [];

  if (input.disks) {
    for (const target of input.disks) {
      const disk = byTarget.get(target);
      if (!disk) return fail(FailureType.UnsupportedDisk, `disk ${target} is not attached to ${found.domain.name}`);
      if (!disk.rbd) return fail(FailureType.UnsupportedDisk, `disk ${target} is not RBD-backed: ${disk.unsupported}`);
      chosen.push(disk);
    }
  } else {
    for (const disk of found.disks) {
      if (disk.rbd) chosen.push(disk);
      else skipped.push({ target: disk.target, reason: disk.unsupported ?? 'not RBD-backed' });
    }
    if (skipped.length && !input.skipNonRbdDisks) {
      const list = skipped.map((s) => `${s.target} (${s.reason})`).join(', ');
      return fail(
        FailureType.UnsupportedDisk,
        `${found.domain.name} has disks vmsnap cannot snapshot: ${list}; set skipNonRbdDisks to snapshot the RBD disks only`,
      );
    }
  }
  if (chosen.length === 0) return fail(FailureType.UnsupportedDisk, `${found.domain.name} has no RBD-backed disk`);
  if (new Set(chosen.map((d) => d.target)).size !== chosen.length) {
    return fail(FailureType.InvalidInput, 'disks lists a target twice');
  }

  const snap = sourceSnapName(runKey);
  const disks: DiskPlan[] = [];
  for (const d of chosen) {
    const plan: DiskPlan = { target: d.target, source: d.rbd!, sourceSnap: snap };
    if (input.target.clone) {
      const image = input.target.images?.[d.target] ?? defaultImageName(found.domain.name, d.target, runKey);
      if (!RBD_NAME.test(image)) return fail(FailureType.InvalidInput, `target image name ${image} is not a valid RBD name`);
      plan.image = { pool: input.target.pool, image };
    }
    disks.push(plan);
  }
  const images = disks.filter((d) => d.image).map((d) => `${d.image!.pool}/${d.image!.image}`);
  if (new Set(images).size !== images.length) return fail(FailureType.InvalidInput, 'two disks map to the same target image');
  for (const d of disks) {
    if (d.image && d.image.pool === d.source.pool && d.image.image === d.source.image) {
      return fail(FailureType.InvalidInput, `target image ${d.image.image} is the source image of ${d.target}`);
    }
  }

  const q = decideQuiesce(input.quiesce, found.agent);
  if (!q.ok) return q;
  return {
    ok: true,
    plan: {
      runKey,
      domain: found.domain,
      disks,
      skipped,
      freeze: q.freeze,
      noFreezeReason: q.reason,
      clone: input.target.clone,
    },
  };
}

type QuiesceDecision = { ok: true; freeze: boolean; reason?: string } | { ok: false; type: FailureType; message: string };

function decideQuiesce(policy: SnapshotInput['quiesce'], agent: InspectResult['agent']): QuiesceDecision {
  if (policy === 'skip') return { ok: true, freeze: false, reason: 'quiesce policy is skip' };
  if (agent.responding) return { ok: true, freeze: true };
  const why = agent.configured
    ? `guest agent does not answer guest-ping (${agent.error ?? 'no reply'})`
    : 'domain has no guest agent channel';
  if (policy === 'require') return { ok: false, type: FailureType.QuiesceUnavailable, message: `quiesce required but ${why}` };
  return { ok: true, freeze: false, reason: why };
}

function fail(type: FailureType, message: string): PlanOutcome {
  return { ok: false, type, message };
}
