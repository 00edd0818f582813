import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/** Wall-clock ms since epoch with sub-ms resolution, comparable across this host's processes. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * CLOCK_MONOTONIC in ms (process.hrtime uses it): comparable across this host's processes since
 * boot and immune to wall-clock steps (NTP, an operator's `date -s`). Every freeze deadline is
 * measured on it; wall time is kept only for humans.
 */
export function monoMs(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}

let cachedBootId: string | undefined;

/** This boot's id: a monotonic time recorded under another boot id means nothing here. */
export function bootId(): string {
  cachedBootId ??= readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  return cachedBootId;
}
