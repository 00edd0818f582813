import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../model/failures';

/**
 * Named points where the fault-injection suite (`npm run test:faults`) kills or stalls a worker.
 * Inert unless the worker was started with VMSNAP_FAULT_POINTS (comma-separated point names) and
 * VMSNAP_FAULT_DIR: at a listed point the worker drops a marker file the suite waits for, then
 * stalls for VMSNAP_FAULT_PAUSE_MS (default: until killed). Production workers never set these.
 */
export type FaultPoint = 'freeze:before-call' | 'freeze:after' | 'snapshot:after' | 'mirror:before-snapshots' | 'flatten:progress' | 'restore:after-clone' | 'restore:after-swap';

export async function faultPoint(point: FaultPoint): Promise<void> {
  const marker = mark(point);
  if (!marker) return;
  const pause = Number(process.env.VMSNAP_FAULT_PAUSE_MS ?? 'Infinity');
  // A suite that has seen what it waited for ends the stall early: it writes `<marker>.release`.
  const end = Date.now() + (Number.isFinite(pause) ? pause : 2 ** 31 - 1);
  while (Date.now() < end && !existsSync(`${marker}.release`)) {
    await new Promise((r) => setTimeout(r, Math.min(100, Math.max(0, end - Date.now()))));
  }
}

/** Ends the stall at `point` of a worker whose VMSNAP_FAULT_DIR is `dir` (see {@link faultPoint}). */
export function releaseFaultPoint(dir: string, point: FaultPoint): void {
  writeFileSync(`${path.join(dir, markerName(point))}.release`, '');
}

/**
 * Stalls like {@link faultPoint}, or with VMSNAP_FAULT_FAIL=1 fails the activity at once
 * (non-retryable), so a test can inject a failure at the point instead of a kill.
 */
export async function failurePoint(point: FaultPoint): Promise<void> {
  if (process.env.VMSNAP_FAULT_FAIL === '1' && mark(point) !== undefined) {
    throw ApplicationFailure.nonRetryable(`fault injected at ${point}`, FailureType.FaultInjected);
  }
  await faultPoint(point);
}

/** Marker only, no stall: for points inside callbacks that must not block. */
export function faultMarker(point: FaultPoint): void {
  mark(point);
}

const markerName = (point: FaultPoint) => point.replace(':', '_');

/** Drops the point's marker file when the point is armed; returns its path when it was. */
function mark(point: FaultPoint): string | undefined {
  const points = process.env.VMSNAP_FAULT_POINTS;
  const dir = process.env.VMSNAP_FAULT_DIR;
  if (!points || !dir || !points.split(',').includes(point)) return undefined;
  const file = path.join(dir, markerName(point));
  rmSync(`${file}.release`, { force: true }); // an earlier stall's release is not this one's
  writeFileSync(file, String(Date.now()));
  return file;
}
