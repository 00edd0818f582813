import type { ImageSet } from './restore-point';

/**
 * `--verify-every N` (input.verifyEvery): this run's image set is verified when none of the N−1
 * sets of the VM before it carries a verdict — counted among the sets of the same schedule when
 * the run has one, so a VM's manual snapshots do not shift its schedule's rhythm. Counting from
 * the verdicts on the images (not a counter in a workflow) keeps it right across schedule
 * restarts, retention, and a verify run that failed. Pure; `sets` newest first (imageSetsOf).
 */
export function verificationDue(sets: ImageSet[], workflowId: string, every: number, schedule?: string): boolean {
  const i = sets.findIndex((s) => s.workflowId === workflowId);
  if (i < 0 || !sets[i].restorable) return false;
  const before = sets.slice(i + 1).filter((s) => schedule === undefined || s.schedule === schedule);
  return before.slice(0, every - 1).every((s) => s.verification === undefined);
}
