/**
 * The guest's view of a freeze window: the longest interval without a completed probe write
 * (support/lab/probe.ts) overlapping [from, to] on the host clock. Waits until every disk has reported
 * a write after `to`, so the gap is closed; the gap includes up to one probe period (~60 ms) of
 * quantization plus the console path's jitter.
 */
import { longestGap, readTicks } from '../support/lab/probe';
import { sleep } from './clock';

export interface ProbeGapResult {
  gapMs?: number;
  /** Why there is no figure (no ticks, gap still open after the wait). */
  note?: string;
}

export async function probeGap(guest: string, diskCount: number, fromMs: number, toMs: number, waitMs = 4000): Promise<ProbeGapResult> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const ticks = await readTicks(guest, fromMs - 1000);
    const after = new Set(ticks.filter((t) => t.hostMs > toMs).map((t) => t.disk));
    if (after.size >= diskCount || Date.now() > deadline) {
      const gap = longestGap(ticks, fromMs, toMs);
      if (!gap) return { note: 'no probe ticks' };
      if (gap.open) return { gapMs: gap.ms, note: `gap open at ${gap.open}` };
      return { gapMs: gap.ms };
    }
    await sleep(50);
  }
}
