import { roundMs, windowBreakdown } from './freeze-window';
import { IMAGE_SNAP, rbdUrl } from './naming';
import type { ReusedQuiesce } from './quiesce-record';
import type { DiskPlan, DiskResult, FreezeResult, InspectResult, SnapshotDisksResult, SnapshotPlan, SnapshotResult, ThawResult } from './types';

/*
 * A run's result, assembled from what its steps returned. Pure: the workflow calls it, and the
 * tests check the arithmetic without a workflow.
 */

/** What the freeze window produced (workflows/capture.ts), and whether it may be called quiesced. */
export interface Capture {
  quiesced: boolean;
  quiesceReason: string;
  frozenFilesystems: number;
  freeze?: FreezeResult;
  snapshot: SnapshotDisksResult;
  thaw?: ThawResult;
}

/** What finalizeDisk returned for a copied disk (nothing in snapshot-only mode or for a reused disk). */
export interface CopiedDisk {
  bytes?: number;
  sha256?: string;
}

/** The freeze's identity on the images: when its call started, worker clock. */
export function frozenAt(c: Capture): string | undefined {
  return c.quiesced && c.freeze ? new Date(Math.round(c.freeze.startedAt)).toISOString() : undefined;
}

/** What each disk records about the freeze it comes from (finalizeDisk). */
export function quiesceRecord(c: Capture): { quiesced: boolean; frozenFilesystems: number; quiesceReason: string; frozenAt?: string } {
  const at = frozenAt(c);
  return { quiesced: c.quiesced, frozenFilesystems: c.frozenFilesystems, quiesceReason: c.quiesceReason, ...(at ? { frozenAt: at } : {}) };
}

/** The window's calls in order: freeze and thaw only when the guest was frozen. */
function windowCalls(c: Capture) {
  return windowBreakdown([
    ...(c.freeze ? [['freeze', c.freeze] as const] : []),
    ['snapshot', c.snapshot] as const,
    // The thaw ends the window when the guest is thawed, not when the status proof is back.
    ...(c.thaw ? [['thaw', { startedAt: c.thaw.startedAt, returnedAt: c.thaw.thawedAt ?? c.thaw.returnedAt }] as const] : []),
  ]);
}

/**
 * Each window call's duration, for the result's stepsMs; and the freeze's and thaw's work on
 * either side of the window (`freeze:prepare`, `thaw:after`), which is work, not orchestration.
 */
export function windowSteps(c: Capture): Record<string, number> {
  const steps = Object.fromEntries(Object.entries(windowCalls(c).calls).map(([k, v]) => [k, roundMs(v)]));
  if (c.freeze?.preparedMs !== undefined) steps['freeze:prepare'] = roundMs(c.freeze.preparedMs);
  if (c.thaw?.afterMs !== undefined) steps['thaw:after'] = roundMs(c.thaw.afterMs);
  return steps;
}

/** Freeze call start → thaw call return, and where it went; null/absent when nothing was frozen. */
export function freezeWindow(c: Capture): Pick<SnapshotResult, 'freezeWindowMs' | 'freezeBreakdownMs'> {
  if (!c.freeze || !c.thaw) return { freezeWindowMs: null, freezeBreakdownMs: undefined };
  const b = windowCalls(c);
  return {
    freezeWindowMs: roundMs(b.windowMs),
    freezeBreakdownMs: { freeze: roundMs(b.calls.freeze!), snapshot: roundMs(b.calls.snapshot!), thaw: roundMs(b.calls.thaw!), gaps: roundMs(b.gaps) },
  };
}

/** The pre-flush as the result shows it; only a freeze that was asked for had one. */
function preFlushOf(c: Capture): Pick<SnapshotResult, 'preFlush'> {
  const p = c.freeze?.preFlush;
  if (!p) return {};
  return { preFlush: { outcome: p.outcome, ms: roundMs(p.ms), ...(p.error ? { error: p.error } : {}) } };
}

export function diskResult(d: DiskPlan, fsid: string, copy: CopiedDisk | undefined): DiskResult {
  const source = `${d.source.pool}/${d.source.image}`;
  const snapshot = `${source}@${d.sourceSnap}`;
  if (!d.image) {
    return { target: d.target, source, location: rbdUrl(fsid, d.source.pool, d.source.image, d.sourceSnap, d.source.namespace), snapshot };
  }
  return {
    target: d.target,
    source,
    location: rbdUrl(fsid, d.image.pool, d.image.image, IMAGE_SNAP, d.image.namespace),
    snapshot,
    image: `${d.image.pool}/${d.image.image}`,
    ...(copy?.bytes !== undefined ? { contentBytes: copy.bytes } : {}),
    ...(copy?.sha256 ? { sha256: copy.sha256 } : {}),
  };
}

export interface RunFacts {
  workflowId: string;
  plan: SnapshotPlan;
  found: InspectResult;
  /** Step times (workflow clock), shared with the workflow, which goes on filling it. */
  steps: Record<string, number>;
}

/** A run that froze, snapshotted and copied: `copies` in plan.disks order. */
export function snapshotResult(run: RunFacts, capture: Capture, copies: (CopiedDisk | undefined)[]): SnapshotResult {
  const at = frozenAt(capture);
  const window = freezeWindow(capture);
  return {
    workflowId: run.workflowId,
    domain: run.plan.domain,
    host: run.found.host,
    quiesced: capture.quiesced,
    quiesceReason: capture.quiesceReason,
    frozenFilesystems: capture.frozenFilesystems,
    freezeWindowMs: window.freezeWindowMs,
    ...(at ? { frozenAt: at } : {}),
    freezeBreakdownMs: window.freezeBreakdownMs,
    ...preFlushOf(capture),
    disks: copies.map((c, i) => diskResult(run.plan.disks[i]!, run.found.fsid, c)),
    skippedDisks: run.plan.skipped,
    stepsMs: run.steps,
  };
}

/** An earlier run of this workflow id already produced everything: its records say how it was made. */
export function reusedResult(run: RunFacts, q: ReusedQuiesce): SnapshotResult {
  return {
    workflowId: run.workflowId,
    domain: run.plan.domain,
    host: run.found.host,
    ...q,
    freezeWindowMs: null,
    disks: run.plan.disks.map((d) => diskResult(d, run.found.fsid, undefined)),
    skippedDisks: run.plan.skipped,
    stepsMs: run.steps,
    reusedExisting: true,
  };
}
