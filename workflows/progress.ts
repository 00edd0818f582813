import { defineQuery, defineSignal, setCurrentDetails, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import { SA } from '../src/model/search-attributes';
import type { FlattenProgress } from '../src/model/types';

export type Phase =
  // the fleet router (workflows/fleet-route.ts)
  | 'locate'
  | 'on-host'
  | 'inspect'
  | 'lock'
  | 'freeze'
  | 'snapshot'
  | 'thaw'
  | 'clone'
  | 'flatten'
  | 'finalize'
  | 'retention'
  | 'compensate'
  | 'thaw-escalated'
  // restoreVm (workflows/restore-vm.ts)
  | 'plan'
  | 'stop'
  | 'verify'
  | 'define'
  | 'start'
  | 'ready'
  // a throw-away copy (vmsnap verify, workflows/verify.ts)
  | 'check'
  | 'discard'
  | 'record'
  | 'done'
  | 'failed';

export interface ProgressView {
  phase: Phase;
  domain: string;
  /** Fleet runs: the run on the VM's host that does the work (its own progress is there). */
  delegatedTo?: { host: string; workflowId: string };
  disks: Record<string, { done: number; total: number; percent: number }>;
}

/** `vmsnap status` and the CLI's progress bar read this. */
export const progressQuery = defineQuery<ProgressView>('progress');
/** Sent by the flatten activity (throttled) so the query can show real progress. */
export const flattenProgressSignal = defineSignal<[FlattenProgress]>('flattenProgress');

/** Phase bookkeeping: query state, the Web UI's current details, and the VmsnapPhase attribute. */
export class Progress {
  private readonly view: ProgressView;

  constructor(domain: string) {
    this.view = { phase: 'inspect', domain, disks: {} };
    setHandler(progressQuery, () => this.view);
    setHandler(flattenProgressSignal, (p) => {
      const percent = p.total > 0 ? Math.floor((100 * p.done) / p.total) : 0;
      this.view.disks[p.target] = { done: p.done, total: p.total, percent };
      this.details();
    });
  }

  /** A disk's flatten finished: the signals are throttled, so the last one may be stale. */
  flattened(target: string): void {
    const d = this.view.disks[target];
    this.view.disks[target] = { done: d?.total ?? 0, total: d?.total ?? 0, percent: 100 };
    this.details();
  }

  /** The router handed the work to a run on the VM's host. */
  delegate(host: string, workflowId: string): void {
    this.view.delegatedTo = { host, workflowId };
    this.phase('on-host');
  }

  phase(phase: Phase): void {
    this.view.phase = phase;
    upsertSearchAttributes([{ key: SA.phase, value: phase }]);
    this.details();
  }

  private details(): void {
    const lines = [`**phase:** ${this.view.phase}`, `**domain:** ${this.view.domain}`];
    if (this.view.delegatedTo) lines.push(`**on host:** ${this.view.delegatedTo.host} (run ${this.view.delegatedTo.workflowId})`);
    for (const [t, d] of Object.entries(this.view.disks)) lines.push(`flatten ${t}: ${d.percent}%`);
    setCurrentDetails(lines.join('\n\n'));
  }
}
