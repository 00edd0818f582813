import { performance } from 'node:perf_hooks';

/** Wall-clock ms since epoch with sub-ms resolution, comparable across this host's processes. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}
