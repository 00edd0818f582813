/**
 * The interleaved freeze-window loop for one configuration (guest × paxos): rounds of
 * floor, naive, nova, vmsnap (A B C D A B C D …), each run measured on the host (freeze call
 * start → thaw call return) and by the guest probe. A failed run is retried once after a pause
 * (the lab is shared: another engineer's run may hold the guest); a second failure is recorded.
 */
import type { Contender, ContenderName } from './contender';
import { sleep } from './clock';
import type { Guest } from './lab-context';
import { probeGap } from './probe-gap';

export interface Sample {
  contender: ContenderName;
  guest: string;
  disks: number;
  paxos: number;
  round: number;
  ok: boolean;
  attempts: number;
  error?: string;
  hostWindowMs?: number;
  probeGapMs?: number;
  probeNote?: string;
  breakdown?: Record<string, number>;
  extra?: Record<string, unknown>;
}

export interface LoopOptions {
  runs: number;
  paxos: number;
  /** Pause between runs, so the guest has written (dirty data) and ticked before the next freeze. */
  pauseMs: number;
  log(line: string): void;
}

export async function freezeWindowLoop(guest: Guest, contenders: readonly Contender[], o: LoopOptions): Promise<Sample[]> {
  const samples: Sample[] = [];
  for (let round = 0; round < o.runs; round++) {
    for (const c of contenders) {
      const s = await measureOnce(guest, c, round, o);
      samples.push(s);
      o.log(
        `  ${guest.name} paxos=${o.paxos} round ${round + 1}/${o.runs} ${c.name.padEnd(6)} ` +
          (s.ok ? `host ${s.hostWindowMs!.toFixed(1)} ms, probe ${s.probeGapMs?.toFixed(1) ?? '-'} ms` : `FAILED: ${s.error}`),
      );
      await sleep(c.name === 'nova' ? o.pauseMs * 3 : o.pauseMs);
    }
  }
  return samples;
}

async function measureOnce(guest: Guest, c: Contender, round: number, o: LoopOptions): Promise<Sample> {
  const base = { contender: c.name, guest: guest.name, disks: guest.disks.length, paxos: o.paxos, round };
  let lastError = '';
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      const t = await c.run(guest, `${round}-${attempt}-${Date.now().toString(36)}`);
      const probe = await probeGap(guest.name, guest.disks.length, t.probeFromMs ?? t.freezeStartMs, t.probeToMs ?? t.thawReturnMs);
      return {
        ...base,
        ok: true,
        attempts: attempt,
        hostWindowMs: t.hostWindowMs,
        probeGapMs: probe.gapMs,
        ...(probe.note ? { probeNote: probe.note } : {}),
        breakdown: t.breakdown,
        ...(t.extra ? { extra: t.extra } : {}),
      };
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
      o.log(`  ${guest.name} ${c.name} attempt ${attempt} failed: ${lastError}`);
      await sleep(2000);
    }
  }
  return { ...base, ok: false, attempts: 2, error: lastError };
}
