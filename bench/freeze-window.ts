/**
 * The interleaved freeze-window loop for one configuration (guest × paxos): rounds of
 * floor, naive, nova, vmsnap (A B C D, B C D A, …: interleaved, start rotating), each run measured on the host (freeze call
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
  // The same pause before every run, long enough for the previous run's snapshot removals (and
  // the OSDs' purged-snap reports that follow them) to be committed by the monitor: otherwise the
  // next snapshot waits for the monitor's next proposal slot (up to paxos_propose_interval), and a
  // contender's position after a longer pause would be an advantage. The starting contender
  // rotates every round (A B C D, B C D A, ...) so no one always follows the same neighbour.
  const pause = Math.max(o.pauseMs, o.paxos * 2000 + 300);
  for (let round = 0; round < o.runs; round++) {
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!);
    for (const c of order) {
      const s = await measureOnce(guest, c, round, o);
      samples.push(s);
      o.log(
        `  ${guest.name} paxos=${o.paxos} round ${round + 1}/${o.runs} ${c.name.padEnd(6)} ` +
          (s.ok ? `host ${s.hostWindowMs!.toFixed(1)} ms, probe ${s.probeGapMs?.toFixed(1) ?? '-'} ms` : `FAILED: ${s.error}`),
      );
      await sleep(pause);
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
      lastError = messageOf(err);
      o.log(`  ${guest.name} ${c.name} attempt ${attempt} failed: ${lastError}`);
      await sleep(2000);
    }
  }
  return { ...base, ok: false, attempts: 2, error: lastError };
}

/** The innermost cause's message (a failed workflow's own failure, e.g. DomainBusy), with its type. */
export function messageOf(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  const type = (e as { type?: string } | undefined)?.type;
  const msg = e instanceof Error ? e.message : String(e);
  return type ? `${type}: ${msg}` : msg;
}
