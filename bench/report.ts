/** Summaries, ratios to the floor within each configuration, and the targets. */
import type { ContenderName } from './contender';
import { CONTENDERS } from './contender';
import type { FlattenResult } from './flatten-throughput';
import type { Sample } from './freeze-window';
import type { LoadResult } from './load-test';
import { fmt, quantile, summarize } from './stats';
import type { Summary } from './stats';

export interface ContenderStats {
  contender: ContenderName;
  ok: number;
  failed: number;
  retried: number;
  host: Summary;
  probe: Summary;
  /** p50 of this contender / p50 of the floor, same configuration (host window; probe gap). */
  ratioToFloorP50: number;
  probeRatioToFloorP50: number;
  /** Median of each breakdown part (ms). */
  breakdownP50: Record<string, number>;
}

export interface ConfigStats {
  guest: string;
  disks: number;
  paxos: number;
  contenders: ContenderStats[];
  /** vmsnap: end-to-end workflow time, sum of stepsMs, and the difference (orchestration overhead). */
  orchestration?: {
    e2eP50: number;
    stepsSumP50: number;
    overheadP50: number;
    overheadPctP50: number;
    /** stepsMs without the waits for turns (`lock`, `slots`): the activities' work alone. */
    workSumP50: number;
    turnsP50: number;
    /** Per run, end-to-end ÷ sum of stepsMs (issue 31's figure), and ÷ the work alone. */
    ratioToStepsP50: number;
    ratioToWorkP50: number;
  };
}

export interface Target {
  name: string;
  config: string;
  value: number;
  limit: string;
  met: boolean;
}

export function configStats(samples: Sample[]): ConfigStats[] {
  const keys = [...new Set(samples.map((s) => `${s.guest}|${s.paxos}`))];
  return keys.map((key) => {
    const mine = samples.filter((s) => `${s.guest}|${s.paxos}` === key);
    const floorOk = mine.filter((s) => s.contender === 'floor' && s.ok);
    const floorP50 = quantile(floorOk.map((s) => s.hostWindowMs!), 0.5);
    const floorProbeP50 = quantile(floorOk.flatMap((s) => (s.probeGapMs === undefined ? [] : [s.probeGapMs])), 0.5);
    const contenders = CONTENDERS.map((c): ContenderStats => {
      const all = mine.filter((s) => s.contender === c);
      const ok = all.filter((s) => s.ok);
      const host = summarize(ok.map((s) => s.hostWindowMs!));
      const probe = summarize(ok.flatMap((s) => (s.probeGapMs === undefined ? [] : [s.probeGapMs])));
      const parts = [...new Set(ok.flatMap((s) => Object.keys(s.breakdown ?? {})))];
      const breakdownP50 = Object.fromEntries(parts.map((p) => [p, quantile(ok.map((s) => s.breakdown?.[p] ?? 0), 0.5)]));
      return {
        contender: c,
        ok: ok.length,
        failed: all.length - ok.length,
        retried: all.filter((s) => s.attempts > 1).length,
        host,
        probe,
        ratioToFloorP50: host.p50 / floorP50,
        probeRatioToFloorP50: probe.p50 / floorProbeP50,
        breakdownP50,
      };
    });
    const vm = mine.filter((s) => s.contender === 'vmsnap' && s.ok && s.extra);
    const orchestration = orchestrationOf(vm.map((s) => ({ e2eMs: s.extra!.e2eMs as number, stepsMs: s.extra!.stepsMs as Record<string, number> })));
    const first = mine[0]!;
    return {
      guest: first.guest,
      disks: first.disks,
      paxos: first.paxos,
      contenders,
      ...(orchestration ? { orchestration } : {}),
    };
  });
}

export type Orchestration = NonNullable<ConfigStats['orchestration']>;

/**
 * End-to-end time against the sum of a run's `stepsMs` (issue 31's figure), and against the
 * activities' work alone (the steps without the waits for turns: `lock`, `slots`). One definition
 * for the freeze-window runs and the load test's runs, idle and at N in flight.
 */
export function orchestrationOf(runs: { e2eMs: number; stepsMs: Record<string, number> }[]): Orchestration | undefined {
  if (!runs.length) return undefined;
  const sum = runs.map((r) => Object.values(r.stepsMs).reduce((a, x) => a + x, 0));
  const turns = runs.map((r) => (r.stepsMs.lock ?? 0) + (r.stepsMs.slots ?? 0));
  const work = sum.map((x, i) => x - turns[i]!);
  return {
    e2eP50: quantile(runs.map((r) => r.e2eMs), 0.5),
    stepsSumP50: quantile(sum, 0.5),
    overheadP50: quantile(runs.map((r, i) => r.e2eMs - sum[i]!), 0.5),
    overheadPctP50: quantile(runs.map((r, i) => (100 * (r.e2eMs - sum[i]!)) / r.e2eMs), 0.5),
    workSumP50: quantile(work, 0.5),
    turnsP50: quantile(turns, 0.5),
    ratioToStepsP50: quantile(runs.map((r, i) => r.e2eMs / sum[i]!), 0.5),
    ratioToWorkP50: quantile(runs.map((r, i) => r.e2eMs / work[i]!), 0.5),
  };
}

function orchestrationLine(o: Orchestration): string {
  return (
    `end-to-end p50 ${fmt(o.e2eP50)} ms, sum of stepsMs p50 ${fmt(o.stepsSumP50)} ms (turns ${fmt(o.turnsP50)}, work ${fmt(o.workSumP50)}); ` +
    `end-to-end ÷ steps p50 ${fmt(o.ratioToStepsP50, 2)}, ÷ work alone p50 ${fmt(o.ratioToWorkP50, 2)}`
  );
}

const byName = (c: ConfigStats, n: ContenderName): ContenderStats => c.contenders.find((x) => x.contender === n)!;

export function targets(configs: ConfigStats[], flatten?: FlattenResult, load?: LoadResult): Target[] {
  const out: Target[] = [];
  for (const c of configs) {
    const cfg = `${c.guest} paxos ${c.paxos}`;
    const floor = byName(c, 'floor');
    const vm = byName(c, 'vmsnap');
    const naive = byName(c, 'naive');
    const nova = byName(c, 'nova');
    const add = (name: string, value: number, limit: string, met: boolean): void => void out.push({ name, config: cfg, value, limit, met: Number.isFinite(value) && met });
    add('vmsnap p50 / floor p50', vm.host.p50 / floor.host.p50, '<= 1.30', vm.host.p50 / floor.host.p50 <= 1.3);
    add('vmsnap p99 / floor p99', vm.host.p99 / floor.host.p99, '<= 2.00', vm.host.p99 / floor.host.p99 <= 2);
    add('vmsnap p50 / naive p50', vm.host.p50 / naive.host.p50, '<= 0.50', vm.host.p50 / naive.host.p50 <= 0.5);
    add('nova p50 / vmsnap p50', nova.host.p50 / vm.host.p50, '>= 20', nova.host.p50 / vm.host.p50 >= 20);
    const o = c.orchestration;
    if (o) add('vmsnap end-to-end / sum of steps (p50)', o.ratioToStepsP50, '<= 1.30', o.ratioToStepsP50 <= 1.3);
  }
  const paxosValues = [...new Set(configs.map((c) => c.paxos))];
  for (const p of paxosValues) {
    const one = configs.find((c) => c.paxos === p && c.disks === 1);
    const three = configs.find((c) => c.paxos === p && c.disks === 3);
    if (one && three) {
      const v = byName(three, 'vmsnap').host.p50 / byName(one, 'vmsnap').host.p50;
      out.push({ name: 'vmsnap 3-disk p50 / 1-disk p50', config: `paxos ${p}`, value: v, limit: '<= 1.50', met: v <= 1.5 });
    }
  }
  if (flatten) out.push({ name: 'flatten binding / rbd flatten (MiB/s)', config: '1 GiB', value: flatten.ratio, limit: '>= 0.95', met: flatten.ratio >= 0.95 });
  if (load) {
    const o = orchestrationOf(load.underLoad.samples);
    if (o) out.push({ name: 'vmsnap end-to-end / sum of steps (p50)', config: `${load.peakInFlight} in flight`, value: o.ratioToStepsP50, limit: '<= 1.30', met: o.ratioToStepsP50 <= 1.3 });
    out.push({ name: 'load p50 window / idle p50', config: `${load.peakInFlight} in flight`, value: load.ratioP50, limit: '<= 1.50', met: load.ratioP50 <= 1.5 });
    out.push({ name: 'worker peak RSS (MiB)', config: `${load.peakInFlight} in flight`, value: load.rssMiB.workerPeak, limit: '< 200', met: load.rssMiB.workerPeak < 200 });
  }
  return out;
}

export function renderTables(configs: ConfigStats[], tgs: Target[], flatten?: FlattenResult, load?: LoadResult): string {
  const lines: string[] = [];
  for (const c of configs) {
    lines.push('');
    lines.push(`freeze window, ${c.guest} (${c.disks} disk${c.disks > 1 ? 's' : ''}), paxos_propose_interval ${c.paxos}  [ms; host = freeze call start → thaw call return; probe = guest's longest write gap]`);
    lines.push('contender   ok fail   host p50   p95     p99     max   x floor |  probe p50   p95     max   x floor | breakdown p50');
    for (const s of c.contenders) {
      const bd = Object.entries(s.breakdownP50).map(([k, v]) => `${k} ${fmt(v)}`).join(', ');
      lines.push(
        `${s.contender.padEnd(10)} ${String(s.ok).padStart(3)} ${String(s.failed).padStart(4)} ` +
          `${fmt(s.host.p50).padStart(9)} ${fmt(s.host.p95).padStart(7)} ${fmt(s.host.p99).padStart(7)} ${fmt(s.host.max).padStart(7)} ${fmt(s.ratioToFloorP50, 2).padStart(7)}x | ` +
          `${fmt(s.probe.p50).padStart(9)} ${fmt(s.probe.p95).padStart(7)} ${fmt(s.probe.max).padStart(7)} ${fmt(s.probeRatioToFloorP50, 2).padStart(7)}x | ${bd}`,
      );
    }
    if (c.orchestration) {
      const o = c.orchestration;
      lines.push(`vmsnap orchestration (snapshot-only runs): ${orchestrationLine(o)}; overhead p50 ${fmt(o.overheadP50)} ms (${fmt(o.overheadPctP50)}%)`);
    }
  }
  if (flatten) {
    lines.push('');
    lines.push(
      `flatten of a 1 GiB clone, ${flatten.reps} rep(s) each, interleaved: binding p50 ${fmt(flatten.binding.p50, 0)} ms (${fmt(flatten.bindingMiBps)} MiB/s), ` +
        `rbd flatten p50 ${fmt(flatten.cli.p50, 0)} ms (${fmt(flatten.cliMiBps)} MiB/s), ratio ${fmt(flatten.ratio, 2)}`,
    );
  }
  if (load) {
    lines.push('');
    lines.push(`load: ${load.approach}`);
    lines.push(
      `  peak in flight ${load.peakInFlight}; completed: rbd-only ${load.rbdOnly.completed}/${load.rbdOnly.started} (failed ${load.rbdOnly.failed}), ` +
        `g1 lane ${load.lanes.g1?.completed} (failed ${load.lanes.g1?.failed}), g3 lane ${load.lanes.g3?.completed} (failed ${load.lanes.g3?.failed}); ` +
        `${fmt(load.elapsedMs / 1000)} s → ${fmt(load.workflowsPerMin)} workflows/min`,
    );
    lines.push(
      `  g1 freeze window idle p50 ${fmt(load.idle.host.p50)} ms (probe ${fmt(load.idle.probe.p50)}), under load p50 ${fmt(load.underLoad.host.p50)} ms ` +
        `(probe ${fmt(load.underLoad.probe.p50)}), max ${fmt(load.underLoad.host.max)} ms; ratio ${fmt(load.ratioP50, 2)}`,
    );
    if (load.floor) {
      lines.push(
        `  floor on the same guest (no orchestration): idle p50 ${fmt(load.floor.idle.p50)} ms, under load p50 ${fmt(load.floor.underLoad.p50)} ms; ratio ${fmt(load.floor.ratioP50, 2)}` +
          `; vmsnap / floor under load ${fmt(load.underLoad.host.p50 / load.floor.underLoad.p50, 2)}`,
      );
    }
    const idleO = orchestrationOf(load.idle.samples);
    const loadO = orchestrationOf(load.underLoad.samples);
    if (idleO) lines.push(`  g1 snapshot-only runs idle: ${orchestrationLine(idleO)}`);
    if (loadO) lines.push(`  g1 snapshot-only runs under load: ${orchestrationLine(loadO)}`);
    lines.push(`  worker RSS: idle ${fmt(load.rssMiB.workerIdle)} MiB, peak ${fmt(load.rssMiB.workerPeak)} MiB; with its child processes peak ${fmt(load.rssMiB.withSnapshotterPeak)} MiB`);
    const tree = load.rssMiB.tree;
    if (tree) {
      const kids = (t: typeof tree.idle) =>
        `snapshotters ${t.snapshotters.count} / ${fmt(t.snapshotters.mib)} MiB, watchdogs ${t.watchdogs.count} / ${fmt(t.watchdogs.mib)} MiB, other ${t.other.count} / ${fmt(t.other.mib)} MiB`;
      lines.push(`  worker + children at rest: ${fmt(tree.idle.total)} MiB (worker ${fmt(tree.idle.worker)}; ${kids(tree.idle)})`);
      lines.push(`  worker + children peak: ${fmt(tree.peak.total)} MiB (worker ${fmt(tree.peak.worker)}; each peak on its own: ${kids(tree.peak)})`);
    }
    if (load.rssMiB.heapTotalPeak !== undefined) {
      lines.push(`  worker V8 heap: peak used ${fmt(load.rssMiB.heapUsedPeak)} MiB of ${fmt(load.rssMiB.heapTotalPeak)} MiB (the rest of the RSS is native: SDK core, librbd/librados, code)`);
    }
    const full = load.fullModeRuns;
    if (full.length) {
      const e2e = full.map((r) => r.e2eMs);
      const sums = full.map((r) => Object.values(r.stepsMs).reduce((a, b) => a + b, 0));
      lines.push(`  full clone mode (g3, under load): end-to-end p50 ${fmt(quantile(e2e, 0.5))} ms; sum of stepsMs p50 ${fmt(quantile(sums, 0.5))} ms (per-disk steps run in parallel, so the sum over-counts)`);
    }
  }
  lines.push('');
  lines.push('targets (vmsnap; host-measured window):');
  for (const t of tgs) lines.push(`  ${t.met ? 'met   ' : 'MISSED'} ${t.name.padEnd(40)} ${t.config.padEnd(22)} ${fmt(t.value, 2).padStart(8)}  (${t.limit})`);
  return lines.join('\n');
}

/**
 * `--memory-ab`: the same load test with the worker on node's defaults (base) and on the flags it
 * ships with (shipped), in one run; each figure and shipped ÷ base.
 */
export function renderMemoryAb(base: LoadResult, shipped: LoadResult): string {
  const rows: [string, number, number][] = [
    ['worker RSS idle (MiB)', base.rssMiB.workerIdle, shipped.rssMiB.workerIdle],
    ['worker RSS peak (MiB)', base.rssMiB.workerPeak, shipped.rssMiB.workerPeak],
    ['worker + children peak (MiB)', base.rssMiB.withSnapshotterPeak, shipped.rssMiB.withSnapshotterPeak],
    ['worker V8 heap peak total (MiB)', base.rssMiB.heapTotalPeak, shipped.rssMiB.heapTotalPeak],
    ['g1 window under load p50 (ms)', base.underLoad.host.p50, shipped.underLoad.host.p50],
    ['g1 end-to-end under load p50 (ms)', orchestrationOf(base.underLoad.samples)?.e2eP50 ?? Number.NaN, orchestrationOf(shipped.underLoad.samples)?.e2eP50 ?? Number.NaN],
    ['workflows/min under load', base.workflowsPerMin, shipped.workflowsPerMin],
  ];
  const lines = ['', `memory A/B: load worker NODE_OPTIONS '${base.nodeOptions}' (base) vs '${shipped.nodeOptions}' (shipped), one run, base first`];
  lines.push(`${'figure'.padEnd(36)} ${'base'.padStart(9)} ${'shipped'.padStart(9)}  shipped÷base`);
  for (const [name, b, s] of rows) lines.push(`${name.padEnd(36)} ${fmt(b).padStart(9)} ${fmt(s).padStart(9)}  ${fmt(s / b, 2)}`);
  return lines.join('\n');
}
