import { workflowInfo } from '@temporalio/workflow';
import type { SnapshotInput } from '../src/model/input';
import { nameIdOf } from './name-id';
import { Progress } from './progress';

/**
 * Who a host run is, computed once. `nameId` is what every name (snapshots, images, owner
 * records) derives from: the run's own workflow id, or its fleet router's for a run the router
 * placed, so a run that follows its VM to another host keeps one set of names. `workflowId` and
 * `runId` are this execution's own: the domain lock and the freeze's owner name them.
 */
export interface RunIdentity {
  nameId: string;
  workflowId: string;
  runId: string;
}

/** What every step of a host run reads: its identity, its input, its step timings and progress. */
export interface RunContext {
  id: RunIdentity;
  input: SnapshotInput;
  steps: Record<string, number>;
  progress: Progress;
}

export function runContext(input: SnapshotInput): RunContext {
  const { workflowId, runId } = workflowInfo();
  return { id: { nameId: nameIdOf(input), workflowId, runId }, input, steps: {}, progress: new Progress(input.domain) };
}
