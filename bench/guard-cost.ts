/**
 * What the host freeze guard costs inside the window: the floor (freeze → snapshot → thaw, one
 * process, connections open) against the same floor with vmsnap's guard armed just before the
 * freeze and released after the thaw, as freezeGuest/thawGuest do (the journal entry, fsync'ed,
 * and the watchdog process spawned at nice 10). Interleaved, ratios within the run:
 *
 *   npx tsx bench/guard-cost.ts [--runs N] [--guest NAME]
 *
 * Needs the lab (npm run lab:up). Prints one line per run and
 * `guard-cost guarded/floor p50: freeze call X.XX, window X.XX, probe X.XX`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FreezeGuard } from '../src/safety/freeze-guard';
import { nowMs, sleep } from './clock';
import type { Contender } from './contender';
import { floorContender } from './contender-floor';
import { AGENT_TIMEOUT_SEC, openLabContext } from './lab-context';
import type { Guest } from './lab-context';
import { probeGap } from './probe-gap';
import { quantile } from './stats';

interface Run {
  variant: 'floor' | 'guarded';
  /** Arming the guard, before the freeze (outside the window). */
  armMs: number;
  freezeMs: number;
  windowMs: number;
  probeMs?: number;
}

/** One floor run, with the guard armed around it as freezeGuest/thawGuest arm and release it. */
async function once(floor: Contender, guest: Guest, guard: FreezeGuard | undefined, tag: string): Promise<Omit<Run, 'variant' | 'probeMs'> & { from: number; to: number }> {
  const armStart = nowMs();
  if (guard) {
    await guard.arm({ domainUuid: guest.dom.uuid, domainName: guest.name, owner: `bench/${tag}`, deadlineMs: 10_000, agentTimeoutSec: AGENT_TIMEOUT_SEC });
  }
  try {
    const t = await floor.run(guest, tag);
    return { armMs: t.freezeStartMs - armStart, freezeMs: t.breakdown.freeze!, windowMs: t.hostWindowMs, from: t.freezeStartMs, to: t.thawReturnMs };
  } finally {
    if (guard) {
      await guard.release(guest.dom.uuid);
      await guard.clear(guest.dom.uuid);
    }
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
  const runs = Number(opt('--runs') ?? '15');
  const ctx = await openLabContext();
  const guestName = opt('--guest') ?? ctx.env.guests!.oneDisk;
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-guard-cost-'));
  const guard = new FreezeGuard({ libvirtUri: ctx.env.libvirt!.uri, stateDir });
  const floor = floorContender(ctx);
  const out: Run[] = [];
  try {
    const guest = await ctx.guest(guestName);
    for (let round = 0; round < runs; round++) {
      // Alternate who goes first, so neither always follows the other's snapshot removal.
      const order = round % 2 ? (['guarded', 'floor'] as const) : (['floor', 'guarded'] as const);
      for (const variant of order) {
        const r = await once(floor, guest, variant === 'guarded' ? guard : undefined, `${round}-${variant}-${Date.now().toString(36)}`);
        const probe = await probeGap(guest.name, guest.disks.length, r.from, r.to);
        out.push({ variant, armMs: r.armMs, freezeMs: r.freezeMs, windowMs: r.windowMs, ...(probe.gapMs !== undefined ? { probeMs: probe.gapMs } : {}) });
        console.log(`  round ${round + 1}/${runs} ${variant.padEnd(7)} freeze ${r.freezeMs.toFixed(1)} ms, window ${r.windowMs.toFixed(1)} ms, probe ${probe.gapMs?.toFixed(1) ?? '-'} ms`);
        await sleep(500);
      }
    }
  } finally {
    await ctx.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
  const p50 = (v: Run['variant'], k: 'armMs' | 'freezeMs' | 'windowMs' | 'probeMs') =>
    quantile(out.filter((r) => r.variant === v && r[k] !== undefined).map((r) => r[k]!), 0.5);
  const ratio = (k: 'freezeMs' | 'windowMs' | 'probeMs') => (p50('guarded', k) / p50('floor', k)).toFixed(2);
  for (const v of ['floor', 'guarded'] as const) {
    console.log(`${v.padEnd(7)} p50: arm ${p50(v, 'armMs').toFixed(1)} ms (before the window), freeze call ${p50(v, 'freezeMs').toFixed(1)} ms, window ${p50(v, 'windowMs').toFixed(1)} ms, probe ${p50(v, 'probeMs').toFixed(1)} ms`);
  }
  console.log(`guard-cost guarded/floor p50: freeze call ${ratio('freezeMs')}, window ${ratio('windowMs')}, probe ${ratio('probeMs')}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
