import { describe, it } from 'vitest';

/**
 * The extended lane: `npm run test:extended` (VMSNAP_EXTENDED=1). The default lane (`npm test`,
 * CI) proves each promise once per tier; the extended lane adds repetitions, the further cases of
 * a promise the default lane already proves, and longer chaos runs. It is run by hand and reported
 * in the notes. A test registered only here is not a skipped test of the default lane: it is not
 * one of its tests (vitest never sees it there).
 */
export const EXTENDED = process.env.VMSNAP_EXTENDED === '1';

/** `it`, in the extended lane only. */
export function extendedIt(name: string, fn: () => unknown, timeout?: number): void {
  if (EXTENDED) it(name, fn as () => Promise<void>, timeout);
}

/** `describe`, in the extended lane only: a suite of extended cases (vitest fails an empty suite). */
export function extendedDescribe(name: string, fn: () => void): void {
  if (EXTENDED) describe(name, fn);
}

/**
 * How many times a repeated test runs: `env` (a variable such as VMSNAP_FAULT_RUNS) when set,
 * else `extended` in the extended lane and `normal` in the default lane.
 */
export function repetitions(env: string | undefined, normal: number, extended: number): number {
  const n = Number(env ?? (EXTENDED ? extended : normal));
  return Number.isInteger(n) && n > 0 ? n : normal;
}
