/**
 * The write-load lane (issue 31): the freeze window of a BUSY guest. Before every run the guest's
 * writers (dirty-writer.ts) write N MiB on each data disk; the run starts the moment they return.
 * Variants, interleaved in one run — every round visits every dirty size in a rotating order and,
 * within it, every variant in a rotating order, so no variant or size owns a stretch of the
 * machine's (shared, noisy) time:
 *   floor         the in-process freeze → librbd snapshots → thaw (contender-floor.ts)
 *   naive         virsh / rbd CLI processes (contender-naive.ts)
 *   vmsnap-nopf   the real workflow on a worker with the pre-flush off (preFlushTimeoutMs 0)
 *   vmsnap-pf     the real workflow on a worker with the product's default pre-flush
 *   floor+sync    the product's pre-flush code (`sync`, waited for to the end), then the floor
 *   floor+syncfs  the same with `sync -f <every data disk's mountpoint>` (syncfs per filesystem)
 * Per run: the host window (freeze call start → thaw call return), the guest probe's longest stall
 * in it and — for variants with a pre-flush — from the pre-flush's start to the thaw, the
 * pre-flush's own time, and the guest's Dirty + Writeback as the writers returned. Ratios are taken
 * against the idle (0 MiB) floor of the same run. Never fails on timing.
 */
import { preFlushGuest } from '../activities/pre-flush';
import { sleep } from './clock';
import type { Contender, RunTiming } from './contender';
import { dirtyGuest, removeDirtyFiles } from '../support/lab/dirty-writer';
import type { DirtyResult } from '../support/lab/dirty-writer';
import { messageOf } from './freeze-window';
import type { Guest, LabContext } from './lab-context';
import { ensureThawed } from './lab-context';
import { probeGap } from './probe-gap';
import { fmt, quantile, summarize } from './stats';
import type { Summary } from './stats';

export const WRITE_LOAD_VARIANTS = ['floor', 'naive', 'vmsnap-nopf', 'vmsnap-pf', 'floor+sync', 'floor+syncfs'] as const;
export type WriteLoadVariant = (typeof WRITE_LOAD_VARIANTS)[number];

interface PreFlushTiming {
  startedAt: number;
  returnedAt: number;
  ms: number;
  outcome: string;
}

interface Variant {
  name: WriteLoadVariant;
  run(guest: Guest, tag: string): Promise<{ t: RunTiming; preFlush?: PreFlushTiming }>;
}

export interface WriteLoadSample {
  variant: WriteLoadVariant;
  guest: string;
  mib: number;
  round: number;
  ok: boolean;
  error?: string;
  dirty?: Omit<DirtyResult, 'startedAt' | 'endedAt'>;
  /** Writers returned → freeze call start (what the kernel had to write back meanwhile on its own). */
  writerToFreezeMs?: number;
  hostWindowMs?: number;
  freezeCallMs?: number;
  probeGapMs?: number;
  /** The probe's longest stall from the pre-flush's start to the thaw (variants with one). */
  probeGapWithPreFlushMs?: number;
  preFlushMs?: number;
  preFlushOutcome?: string;
}

export interface WriteLoadCell {
  variant: WriteLoadVariant;
  mib: number;
  ok: number;
  failed: number;
  host: Summary;
  probe: Summary;
  probeWithPreFlush?: Summary;
  preFlush?: Summary;
  freezeCall: Summary;
  writerToFreeze: Summary;
  /** p50 / the idle (0 MiB) floor's p50 in this run. */
  hostRatioToIdleFloor: number;
  probeRatioToIdleFloor: number;
}

export interface WriteLoadResult {
  guest: string;
  rateMiBps: number;
  sizes: number[];
  /** Per size: the guest's Dirty + Writeback (MiB) as the writers returned, and their time. */
  dirtyAtEnd: Record<string, { dirtyMiB: Summary; writeMs: Summary }>;
  cells: WriteLoadCell[];
  samples: WriteLoadSample[];
}

export interface WriteLoadOptions {
  runs: number;
  sizes: number[];
  rateMiBps: number;
  /** Where the writers' file wraps (support/lab/dirty-writer.ts); default the lab guests'. */
  wrapMiB?: number;
  pauseMs: number;
  log(line: string): void;
}

/** The lane's variants, from the bench's contenders and its two vmsnap workers. */
export function writeLoadVariants(c: { floor: Contender; naive: Contender; vmsnapNoPreFlush: Contender; vmsnapPreFlush: Contender }, ctx: LabContext): Variant[] {
  const plain = (name: WriteLoadVariant, k: Contender): Variant => ({ name, run: async (g, tag) => ({ t: await k.run(g, tag) }) });
  const fromWorkflow = (name: WriteLoadVariant, k: Contender): Variant => ({
    name,
    async run(g, tag) {
      const t = await k.run(g, tag);
      const pf = t.extra?.preFlush as PreFlushTiming | undefined;
      return { t, ...(pf ? { preFlush: pf } : {}) };
    },
  });
  // The product's pre-flush code with room to finish: how long the write-back really takes.
  const floorAfter = (name: WriteLoadVariant, argv: (g: Guest) => string[]): Variant => ({
    name,
    async run(g, tag) {
      const pf = await preFlushGuest(ctx.libvirt, g.dom, argv(g), 30_000);
      if (pf.outcome !== 'done') throw new Error(`${name}: pre-flush ${pf.outcome}: ${pf.error ?? ''}`);
      return { t: await c.floor.run(g, tag), preFlush: pf };
    },
  });
  return [
    plain('floor', c.floor),
    plain('naive', c.naive),
    fromWorkflow('vmsnap-nopf', c.vmsnapNoPreFlush),
    fromWorkflow('vmsnap-pf', c.vmsnapPreFlush),
    floorAfter('floor+sync', () => ['sync']),
    floorAfter('floor+syncfs', (g) => ['sync', '-f', ...g.disks.map((d) => `/mnt/${d.target}`)]),
  ];
}

export async function writeLoadLane(ctx: LabContext, guest: Guest, variants: Variant[], o: WriteLoadOptions): Promise<WriteLoadResult> {
  const samples: WriteLoadSample[] = [];
  try {
    for (let round = 0; round < o.runs; round++) {
      const sizes = o.sizes.map((_, i) => o.sizes[(i + round) % o.sizes.length]!);
      for (const [si, mib] of sizes.entries()) {
        const order = variants.map((_, i) => variants[(i + round + si) % variants.length]!);
        for (const v of order) {
          const s = await measureOnce(ctx, guest, v, mib, round, o);
          samples.push(s);
          o.log(
            `  ${guest.name} round ${round + 1}/${o.runs} ${String(mib).padStart(3)} MiB ${v.name.padEnd(12)} ` +
              (s.ok
                ? `dirty ${fmt((s.dirty!.dirtyKiB + s.dirty!.writebackKiB) / 1024)} MiB, window ${fmt(s.hostWindowMs)} ms, probe ${fmt(s.probeGapMs)} ms` +
                  (s.preFlushMs !== undefined ? `, pre-flush ${fmt(s.preFlushMs)} ms (${s.preFlushOutcome}), probe from it ${fmt(s.probeGapWithPreFlushMs)} ms` : '')
                : `FAILED: ${s.error}`),
          );
          await sleep(o.pauseMs);
        }
      }
    }
  } finally {
    await ensureThawed(ctx, guest).catch((err: unknown) => o.log(`  could not confirm ${guest.name} thawed: ${String(err)}`));
    await removeDirtyFiles(ctx.libvirt, guest.dom).catch((err: unknown) => o.log(`  could not remove the writers' files in ${guest.name}: ${String(err)}`));
  }
  return summarizeLane(guest.name, o, samples);
}

async function measureOnce(ctx: LabContext, guest: Guest, v: Variant, mib: number, round: number, o: WriteLoadOptions): Promise<WriteLoadSample> {
  const base = { variant: v.name, guest: guest.name, mib, round };
  let lastError = '';
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      const d = await dirtyGuest(ctx.libvirt, guest.dom, mib, o.rateMiBps, o.wrapMiB);
      const { t, preFlush } = await v.run(guest, `wl-${mib}-${round}-${attempt}-${Date.now().toString(36)}`);
      const probe = await probeGap(guest.name, guest.disks.length, t.probeFromMs ?? t.freezeStartMs, t.probeToMs ?? t.thawReturnMs);
      const withPf = preFlush ? await probeGap(guest.name, guest.disks.length, preFlush.startedAt, t.thawReturnMs) : undefined;
      const { startedAt: _s, endedAt, ...dirty } = d;
      return {
        ...base,
        ok: true,
        dirty,
        writerToFreezeMs: t.freezeStartMs - endedAt,
        hostWindowMs: t.hostWindowMs,
        ...(t.breakdown.freeze !== undefined ? { freezeCallMs: t.breakdown.freeze } : {}),
        ...(probe.gapMs !== undefined ? { probeGapMs: probe.gapMs } : {}),
        ...(withPf?.gapMs !== undefined ? { probeGapWithPreFlushMs: withPf.gapMs } : {}),
        ...(preFlush ? { preFlushMs: preFlush.ms, preFlushOutcome: preFlush.outcome } : {}),
      };
    } catch (err) {
      lastError = messageOf(err);
      o.log(`  ${guest.name} ${v.name} ${mib} MiB attempt ${attempt} failed: ${lastError}`);
      await ensureThawed(ctx, guest).catch(() => undefined);
      await sleep(2000);
    }
  }
  return { ...base, ok: false, error: lastError };
}

export function summarizeLane(guest: string, o: Pick<WriteLoadOptions, 'sizes' | 'rateMiBps'>, samples: WriteLoadSample[]): WriteLoadResult {
  const ok = samples.filter((s) => s.ok);
  const vals = (xs: WriteLoadSample[], f: (s: WriteLoadSample) => number | undefined) => xs.flatMap((s) => (f(s) === undefined ? [] : [f(s)!]));
  const idleFloor = ok.filter((s) => s.variant === 'floor' && s.mib === 0);
  const idleHost = quantile(vals(idleFloor, (s) => s.hostWindowMs), 0.5);
  const idleProbe = quantile(vals(idleFloor, (s) => s.probeGapMs), 0.5);
  const cells: WriteLoadCell[] = [];
  for (const mib of o.sizes) {
    for (const variant of WRITE_LOAD_VARIANTS) {
      const all = samples.filter((s) => s.variant === variant && s.mib === mib);
      if (!all.length) continue;
      const mine = all.filter((s) => s.ok);
      const host = summarize(vals(mine, (s) => s.hostWindowMs));
      const probe = summarize(vals(mine, (s) => s.probeGapMs));
      const pf = vals(mine, (s) => s.preFlushMs);
      cells.push({
        variant,
        mib,
        ok: mine.length,
        failed: all.length - mine.length,
        host,
        probe,
        ...(pf.length ? { preFlush: summarize(pf), probeWithPreFlush: summarize(vals(mine, (s) => s.probeGapWithPreFlushMs)) } : {}),
        freezeCall: summarize(vals(mine, (s) => s.freezeCallMs)),
        writerToFreeze: summarize(vals(mine, (s) => s.writerToFreezeMs)),
        hostRatioToIdleFloor: host.p50 / idleHost,
        probeRatioToIdleFloor: probe.p50 / idleProbe,
      });
    }
  }
  const dirtyAtEnd = Object.fromEntries(
    o.sizes.map((mib) => {
      const mine = ok.filter((s) => s.mib === mib && s.dirty);
      return [String(mib), { dirtyMiB: summarize(mine.map((s) => (s.dirty!.dirtyKiB + s.dirty!.writebackKiB) / 1024)), writeMs: summarize(mine.map((s) => s.dirty!.writeMs)) }];
    }),
  );
  return { guest, rateMiBps: o.rateMiBps, sizes: o.sizes, dirtyAtEnd, cells, samples };
}

/** The issue's targets for the lane, on its 64 MiB row (the largest size when 64 was not run). */
export function writeLoadTargets(r: WriteLoadResult): { name: string; value: number; limit: string; met: boolean }[] {
  const cell = (v: WriteLoadVariant, mib: number) => r.cells.find((c) => c.variant === v && c.mib === mib);
  const busy = r.sizes.includes(64) ? 64 : Math.max(...r.sizes);
  const idle = cell('vmsnap-pf', 0);
  const pf = cell('vmsnap-pf', busy);
  const floor = cell('floor', busy);
  if (!idle || !pf || !floor) return [];
  const t = (name: string, value: number, limit: number, strict = false) => ({ name, value, limit: `${strict ? '<' : '≤'} ${limit}`, met: strict ? value < limit : value <= limit });
  return [
    t(`${r.guest}: vmsnap window ${busy} MiB / its idle window (p50)`, pf.host.p50 / idle.host.p50, 1.2),
    t(`${r.guest}: vmsnap probe stall ${busy} MiB / its idle stall (p50)`, pf.probe.p50 / idle.probe.p50, 1.2),
    t(`${r.guest}: vmsnap window / floor window at ${busy} MiB (p50)`, pf.host.p50 / floor.host.p50, 1, true),
    t(`${r.guest}: vmsnap probe stall / floor probe stall at ${busy} MiB (p50)`, pf.probe.p50 / floor.probe.p50, 1, true),
  ];
}

const range = (s: Summary | undefined) => (s && s.n ? `${fmt(s.p50, 0)} (${fmt(s.min, 0)}–${fmt(s.max, 0)})` : '-');

export function renderWriteLoad(r: WriteLoadResult): string {
  const lines: string[] = [];
  lines.push(`\nWrite-load lane, ${r.guest} (writers ${r.rateMiBps > 0 ? `≤ ${r.rateMiBps} MiB/s` : 'unpaced'} per disk; ms, p50 (min–max); ratios = p50 / idle floor p50 of this run)`);
  lines.push('  MiB written | dirty at writers\' end (MiB) | writers (ms)');
  for (const mib of r.sizes) {
    const d = r.dirtyAtEnd[String(mib)];
    lines.push(`  ${String(mib).padStart(4)} | ${range(d?.dirtyMiB)} | ${range(d?.writeMs)}`);
  }
  lines.push('  MiB | variant      |  n | window            | ×idle floor | probe stall       | ×idle floor | freeze call       | pre-flush        | stall from pre-flush');
  for (const c of r.cells) {
    lines.push(
      `  ${String(c.mib).padStart(3)} | ${c.variant.padEnd(12)} | ${String(c.ok).padStart(2)} | ${range(c.host).padEnd(17)} | ${fmt(c.hostRatioToIdleFloor, 2).padStart(11)} | ` +
        `${range(c.probe).padEnd(17)} | ${fmt(c.probeRatioToIdleFloor, 2).padStart(11)} | ${range(c.freezeCall).padEnd(17)} | ${range(c.preFlush).padEnd(16)} | ${range(c.probeWithPreFlush)}` +
        (c.failed ? `  (${c.failed} failed)` : ''),
    );
  }
  for (const t of writeLoadTargets(r)) lines.push(`  target ${t.name}: ${fmt(t.value, 2)} (${t.limit}) ${t.met ? 'met' : 'MISSED'}`);
  return lines.join('\n');
}
