/**
 * N snapshot workflows in flight on one worker (its own process, load-worker.ts).
 *
 * The lab has two guests with an agent and vmsnap allows one snapshot per VM at a time (the
 * per-domain lock refuses a second run with DomainBusy), so N concurrent consistentSnapshot runs
 * of real guests cannot exist here. What runs instead, all at once on the one worker:
 *   - N−2 slots, each keeping one `rbdOnlySnapshot` workflow (load-workflows.ts) in flight: the
 *     same snapshot/clone/flatten/finalize activities on RBD images that no VM uses (8 MiB, 4 MiB
 *     written), nothing frozen;
 *   - 2 guest lanes running the real consistentSnapshot back to back:
 *     vmsnap-g1 in snapshot-only mode (its freeze window is the "under load" figure, compared
 *     with the same runs on the same worker before the load) and vmsnap-g3 in full clone mode.
 * The slots keep their workflows in flight until both lanes have done their runs.
 * Reported: workflows/min over the load phase, freeze window idle vs under load, the worker's
 * peak RSS (and with its snapshotter child).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import { createImage, isNotFound, openImage } from '../src/ceph';
import type { IoCtx } from '../src/ceph';
import type { SnapshotRequest } from '../src/model/input';
import type { SnapshotResult } from '../src/model/types';
import type { LabEnv } from '../support/lab/env';
import { labWorkerConfig } from '../support/lab/worker-config';
import { nowMs, sleep } from './clock';
import { removeKeptSnapshots, runSnapshotWorkflow, windowFromHistory } from './contender-vmsnap';
import type { WorkflowRun } from './contender-vmsnap';
import type { Guest, LabContext } from './lab-context';
import { removeImageRetrying, removeSnapIfAny } from './lab-context';
import type { rbdOnlySnapshot } from './load-workflows';
import { messageOf } from './freeze-window';
import { floorContender } from './contender-floor';
import { probeGap } from './probe-gap';
import { summarize } from './stats';
import { treeRss, TreePeaks } from './process-tree';
import type { TreeRss } from './process-tree';
import type { Summary } from './stats';

export interface LoadOptions {
  workflows: number;
  /** NODE_OPTIONS of the load worker's process (and so of its children), as a unit would set it. */
  nodeOptions: string;
  idleRuns: number;
  minLaneRuns: number;
  log(line: string): void;
}

export interface WindowSample {
  hostWindowMs: number;
  probeGapMs?: number;
  e2eMs: number;
  stepsMs: Record<string, number>;
  /** Workflows in flight on the worker when this run started (load test only). */
  inFlightAtStart?: number;
}

export interface LoadResult {
  approach: string;
  /** NODE_OPTIONS the load worker ran with ('' = node's defaults). */
  nodeOptions: string;
  inFlightTarget: number;
  peakInFlight: number;
  rbdOnly: { started: number; completed: number; failed: number; errors: string[] };
  lanes: Record<string, { completed: number; failed: number; errors: string[] }>;
  elapsedMs: number;
  workflowsPerMin: number;
  idle: { samples: WindowSample[]; host: Summary; probe: Summary };
  underLoad: { samples: WindowSample[]; host: Summary; probe: Summary };
  /** under-load p50 / idle p50 (host window). */
  ratioP50: number;
  /**
   * The floor (freeze → librbd snapshot → thaw in the bench process, no orchestration) on the same
   * guest, one run after each vmsnap run, idle and under the same load: how much of the growth is
   * the host (guest CPU, Ceph) rather than vmsnap.
   */
  floor: { idle: Summary; underLoad: Summary; ratioP50: number };
  fullModeRuns: { e2eMs: number; stepsMs: Record<string, number> }[];
  rssMiB: {
    workerPeak: number;
    workerIdle: number;
    /** Worker + every descendant (snapshotters, watchdogs), peak of the sums. */
    withSnapshotterPeak: number;
    heapUsedPeak: number;
    heapTotalPeak: number;
    /**
     * The worker's process tree (process-tree.ts): at rest after its idle runs (median of 15
     * samples over 3 s) and the peak of each figure over the whole test, in MiB.
     */
    tree: { idle: TreeMiB; peak: TreeMiB };
  };
}

export interface TreeMiB {
  worker: number;
  total: number;
  snapshotters: { count: number; mib: number };
  watchdogs: { count: number; mib: number };
  other: { count: number; mib: number };
}

function treeMiB(t: Pick<TreeRss, 'workerKiB' | 'totalKiB' | 'children'>): TreeMiB {
  const m = (c: { count: number; kib: number }) => ({ count: c.count, mib: c.kib / 1024 });
  return { worker: t.workerKiB / 1024, total: t.totalKiB / 1024, snapshotters: m(t.children.snapshotter), watchdogs: m(t.children.watchdog), other: m(t.children.other) };
}

/** The tree at rest: the median sample by total of `n` taken `everyMs` apart. */
async function restingTree(pid: number, n = 15, everyMs = 200): Promise<TreeRss> {
  const xs: TreeRss[] = [];
  for (let i = 0; i < n; i++) {
    xs.push(treeRss(pid));
    await sleep(everyMs);
  }
  return xs.sort((a, b) => a.totalKiB - b.totalKiB)[Math.floor(n / 2)]!;
}

const ROOT = path.resolve(__dirname, '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- plain JS shared with bin/vmsnap.js
const { distIsFresh } = require('../bin/source-stamp.js') as { distIsFresh(root: string): boolean };
const quiet = (): void => undefined;
const quietLogger = { log: quiet, trace: quiet, debug: quiet, info: quiet, warn: quiet, error: (m: string) => process.stderr.write(`${m}\n`) };

/**
 * The worker as production runs it: compiled dist/ (rebuilt here when stale) and a prebuilt
 * workflow bundle, so no TypeScript loader or webpack inflates the RSS measured.
 */
/**
 * The load worker runs dist/: build it when stale. run.ts calls this before any measurement, so
 * the build's CPU never lands in a measured window.
 */
export function ensureFreshBuild(log: (s: string) => void): void {
  if (distIsFresh(ROOT)) return;
  log('bench: dist/ is stale: npm run build');
  const b = spawnSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs')], { cwd: ROOT, stdio: 'inherit' });
  if (b.status !== 0) throw new Error('npm run build failed');
}

interface HeapPeak {
  heapUsed: number;
  heapTotal: number;
  external: number;
}

async function startWorker(lab: LabEnv, host: string, nodeOptions: string, log: (s: string) => void): Promise<{ pid: number; taskQueue: string; heapPeak: HeapPeak; stop(): Promise<void> }> {
  ensureFreshBuild(log);
  // Resolved here, so the compiled worker needs no lab code (and dist/ ships none).
  const config = labWorkerConfig(lab, host, process.env);
  const bundlePath = path.join(mkdtempSync(path.join(os.tmpdir(), 'vmsnap-bench-bundle-')), 'load-workflows.js');
  const { code } = await bundleWorkflowCode({ workflowsPath: path.join(ROOT, 'bench/load-workflows.ts'), logger: quietLogger });
  writeFileSync(bundlePath, code);
  const proc = spawn(process.execPath, [path.join(ROOT, 'dist/bench/load-worker.js'), bundlePath, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: nodeOptions },
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let out = '';
  const heapPeak: HeapPeak = { heapUsed: 0, heapTotal: 0, external: 0 };
  let partial = '';
  proc.stdout.on('data', (b: Buffer) => {
    const lines = (partial + b.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('MEM ')) continue;
      const m = JSON.parse(line.slice(4)) as HeapPeak;
      for (const k of ['heapUsed', 'heapTotal', 'external'] as const) heapPeak[k] = Math.max(heapPeak[k], m[k]);
    }
  });
  const taskQueue = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`load worker not ready in 120 s: ${out.slice(-2000)}`)), 120_000);
    const onData = (b: Buffer): void => {
      out += b.toString();
      const m = /READY (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`load worker exited: ${out.slice(-2000)}`));
    });
  });
  log(`  load worker pid ${proc.pid} on ${taskQueue}`);
  return {
    pid: proc.pid!,
    taskQueue,
    heapPeak,
    async stop() {
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 45_000);
      await exited;
      clearTimeout(t);
    },
  };
}

async function guestWindowRun(ctx: LabContext, client: Client, taskQueue: string, guest: Guest, request: SnapshotRequest): Promise<{ run: WorkflowRun; sample: WindowSample }> {
  let last: unknown;
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      const run = await runSnapshotWorkflow(client, taskQueue, request, 'bench-load');
      const r = run.result;
      const abs = await windowFromHistory(client, r.workflowId).catch(() => undefined);
      const probe = await probeGap(guest.name, guest.disks.length, abs?.freezeStartMs ?? run.startMs, abs?.thawReturnMs ?? run.endMs);
      return { run, sample: { hostWindowMs: r.freezeWindowMs ?? Number.NaN, probeGapMs: probe.gapMs, e2eMs: run.e2eMs, stepsMs: r.stepsMs } };
    } catch (err) {
      last = err;
      await sleep(2000);
    }
  }
  throw last;
}

async function removeResultImages(ctx: LabContext, r: SnapshotResult): Promise<void> {
  await removeKeptSnapshots(ctx, r).catch(() => undefined);
  for (const d of r.disks) {
    if (!d.image) continue;
    const [pool, name] = d.image.split('/') as [string, string];
    await removeOwnImage(await ctx.ioctx(pool), name);
  }
}

async function removeOwnImage(io: IoCtx, name: string): Promise<void> {
  try {
    const img = await openImage(io, name);
    try {
      for (const s of await img.listSnaps()) await removeSnapIfAny(img, s.name);
    } finally {
      await img.close();
    }
    await removeImageRetrying(io, name);
  } catch (err) {
    if (!isNotFound(err)) process.stderr.write(`bench: could not remove ${io.pool}/${name}: ${String(err)}\n`);
  }
}

export async function loadTest(ctx: LabContext, client: Client, g1: Guest, g3: Guest, o: LoadOptions): Promise<LoadResult> {
  const host = `bench-load-${randomUUID().slice(0, 6)}`;
  const worker = await startWorker(ctx.env, host, o.nodeOptions, o.log);
  // Let the new process finish warming up (bundle load, connections) before the idle baseline.
  await sleep(5000);
  const peaks = new TreePeaks();
  const sampler = setInterval(() => peaks.add(treeRss(worker.pid)), 200);
  const vmsIo = await ctx.ioctx(ctx.env.pools.vm);
  const imagesIo = await ctx.ioctx(ctx.env.pools.image);
  const sources: string[] = [];
  const toClean: SnapshotResult[] = [];
  const nRbd = Math.max(0, o.workflows - 2);
  const tag = randomUUID().slice(0, 6);
  const g1Request: SnapshotRequest = { domain: g1.name, quiesce: 'require', target: { clone: false } };
  try {
    // Idle: the same g1 snapshot-only runs on this worker, nothing else in flight.
    const idle: WindowSample[] = [];
    const floor = floorContender(ctx);
    const floorIdle: number[] = [];
    const floorLoad: number[] = [];
    for (let i = 0; i < o.idleRuns; i++) {
      const { run, sample } = await guestWindowRun(ctx, client, worker.taskQueue, g1, g1Request);
      toClean.push(run.result);
      idle.push(sample);
      await sleep(300);
      floorIdle.push((await floor.run(g1, `load-idle-${tag}-${i}`)).hostWindowMs);
      o.log(`  idle g1 run ${i + 1}/${o.idleRuns}: window ${sample.hostWindowMs.toFixed(1)} ms, probe ${sample.probeGapMs?.toFixed(1) ?? '-'} ms; floor ${floorIdle[i]!.toFixed(1)} ms`);
      await sleep(300);
    }
    const idleTree = await restingTree(worker.pid);
    const workerIdle = idleTree.workerKiB;

    for (let i = 0; i < nRbd; i++) {
      const name = `bench-load-src-${tag}-${i}`;
      await createImage(vmsIo, name, 8 << 20);
      sources.push(name);
      const img = await openImage(vmsIo, name);
      try {
        await img.write(0, Buffer.alloc(4 << 20, i + 1));
      } finally {
        await img.close();
      }
    }

    o.log(`  load: ${nRbd} rbdOnlySnapshot slots (each starts its next workflow when one ends) + 2 guest lanes (g1 snapshot-only, g3 full clone) on one worker`);
    let inFlight = 0;
    let peakInFlight = 0;
    const track = async <T>(p: Promise<T>): Promise<T> => {
      inFlight++;
      peakInFlight = Math.max(peakInFlight, inFlight);
      try {
        return await p;
      } finally {
        inFlight--;
      }
    };
    const t0 = nowMs();
    let lastDone = t0;
    const rbdErrors: string[] = [];
    let rbdDone = 0;
    let rbdStarted = 0;
    let stopping = false;
    // Sustained load: every slot keeps one rbdOnlySnapshot in flight until the lanes are done.
    // The bench removes each finished image itself (outside the worker) so the pool stays small.
    const slot = async (i: number): Promise<void> => {
      for (let k = 0; !stopping; k++) {
        const image = `bench-load-img-${tag}-${i}-${k}`;
        rbdStarted++;
        try {
          const handle = await client.workflow.start<typeof rbdOnlySnapshot>('rbdOnlySnapshot', {
            taskQueue: worker.taskQueue,
            workflowId: `bench-rbd-only-${tag}-${i}-${k}`,
            args: [{ source: { pool: vmsIo.pool, image: sources[i]! }, snap: `vmsnap-bench-${tag}-${i}-${k}`, image: { pool: imagesIo.pool, image } }],
            workflowExecutionTimeout: '15m',
          });
          await track(handle.result());
          rbdDone++;
          lastDone = nowMs();
        } catch (err) {
          rbdErrors.push(messageOf(err));
          if (rbdErrors.length > 20) stopping = true;
        } finally {
          await removeOwnImage(imagesIo, image);
        }
      }
    };
    const slots = Promise.all(sources.map((_, i) => slot(i)));

    const lanes: LoadResult['lanes'] = { g1: { completed: 0, failed: 0, errors: [] }, g3: { completed: 0, failed: 0, errors: [] } };
    const underLoad: WindowSample[] = [];
    const fullModeRuns: LoadResult['fullModeRuns'] = [];
    const lane = async (key: 'g1' | 'g3', guest: Guest, request: SnapshotRequest): Promise<void> => {
      for (let i = 0; lanes[key]!.completed < o.minLaneRuns && lanes[key]!.failed <= 3 && !(stopping && rbdErrors.length > 20); i++) {
        try {
          const atStart = inFlight;
          const { run, sample } = await track(guestWindowRun(ctx, client, worker.taskQueue, guest, request));
          toClean.push(run.result);
          lanes[key]!.completed++;
          lastDone = nowMs();
          if (key === 'g1') underLoad.push({ ...sample, inFlightAtStart: atStart });
          else fullModeRuns.push({ e2eMs: run.e2eMs, stepsMs: run.result.stepsMs });
          let floorNote = '';
          if (key === 'g1') {
            floorLoad.push((await floor.run(guest, `load-${tag}-${i}`)).hostWindowMs);
            floorNote = `; floor ${floorLoad[floorLoad.length - 1]!.toFixed(1)} ms`;
          }
          o.log(`  load ${key} run ${i + 1}: window ${sample.hostWindowMs.toFixed(1)} ms, probe ${sample.probeGapMs?.toFixed(1) ?? '-'} ms, in flight at start ${atStart}, now ${inFlight}${floorNote}`);
        } catch (err) {
          lanes[key]!.failed++;
          lanes[key]!.errors.push(messageOf(err));
        }
      }
    };
    // Let the slots fill the worker before the first guest run.
    await sleep(1000);
    await Promise.all([lane('g1', g1, g1Request), lane('g3', g3, { domain: g3.name, quiesce: 'require', target: { clone: true, pool: imagesIo.pool } })]);
    stopping = true;
    await slots;
    const elapsedMs = lastDone - t0;
    const completed = rbdDone + lanes.g1!.completed + lanes.g3!.completed;
    void rbdStarted;
    const idleHost = summarize(idle.map((s) => s.hostWindowMs));
    const loadHost = summarize(underLoad.map((s) => s.hostWindowMs));
    return {
      nodeOptions: o.nodeOptions,
      approach:
        `${nRbd} slots each keeping one rbdOnlySnapshot workflow in flight (real snapshot/clone/flatten/finalize activities on 8 MiB RBD-only images), ` +
        'plus 2 guest lanes of the real consistentSnapshot (vmsnap-g1 snapshot-only, vmsnap-g3 full clone) back to back, one worker process',
      inFlightTarget: o.workflows,
      peakInFlight,
      rbdOnly: { started: rbdStarted, completed: rbdDone, failed: rbdErrors.length, errors: rbdErrors.slice(0, 5) },
      lanes,
      elapsedMs,
      workflowsPerMin: completed / (elapsedMs / 60_000),
      idle: { samples: idle, host: idleHost, probe: summarize(idle.flatMap((s) => (s.probeGapMs === undefined ? [] : [s.probeGapMs]))) },
      underLoad: { samples: underLoad, host: loadHost, probe: summarize(underLoad.flatMap((s) => (s.probeGapMs === undefined ? [] : [s.probeGapMs]))) },
      ratioP50: loadHost.p50 / idleHost.p50,
      floor: { idle: summarize(floorIdle), underLoad: summarize(floorLoad), ratioP50: summarize(floorLoad).p50 / summarize(floorIdle).p50 },
      fullModeRuns,
      rssMiB: {
        workerPeak: peaks.workerKiB / 1024,
        workerIdle: workerIdle / 1024,
        withSnapshotterPeak: peaks.totalKiB / 1024,
        heapUsedPeak: worker.heapPeak.heapUsed / 1048576,
        heapTotalPeak: worker.heapPeak.heapTotal / 1048576,
        tree: { idle: treeMiB(idleTree), peak: treeMiB(peaks) },
      },
    };
  } finally {
    clearInterval(sampler);
    await worker.stop().catch(() => undefined);
    for (const r of toClean) await removeResultImages(ctx, r);
    for (const name of sources) await removeOwnImage(vmsIo, name);
  }
}
