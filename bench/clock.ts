/** Host wall clock with sub-ms resolution: the probe's ticks are stamped on the same clock. */
export { nowMs } from '../src/host/clock';

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
