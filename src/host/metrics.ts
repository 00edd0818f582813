/**
 * vmsnap's own metrics, exposed by the worker's HTTP endpoint in Prometheus's text format through
 * prom-client, each worker with a registry of its own (never prom-client's global one: tests and
 * the bench run several workers in one process). Prometheus's conventions: base units (seconds,
 * bytes), `_total` on counters, a HELP line on every family, labels from small fixed sets — a
 * `domain` label only where its values are this host's VMs.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { VERSION } from '../version';
import { FailureType } from '../model/failures';
import type { ThawLayer } from '../model/types';
import type { RunEnd } from '../model/run-end';

/**
 * Gauges whose truth lives elsewhere (the fleet registry, the freeze journal), read when /metrics
 * is scraped rather than on a timer of the worker's own: as fresh as the scrape, and no reads
 * while nobody looks.
 */
export interface ScrapeSource<T> {
  /** Should stop when `signal` aborts; a scrape stops waiting for it then either way. */
  read(signal: AbortSignal): Promise<T>;
  publish(metrics: Metrics, value: T): void;
  /** The read failed or did not answer in time: what the source's gauges say instead. */
  unavailable(metrics: Metrics, err: unknown): void;
}

/** Freeze windows: a fast one is tens of ms; the guard's deadline is seconds; 30 s is far out. */
export const FREEZE_WINDOW_BUCKETS = [0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 30];
/** Snapshot calls inside the window. */
export const SNAPSHOT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30];
/** DR runs' replication lag: a second for a few changed MiB on a LAN, hours for a large delta over a WAN. */
export const MIRROR_RPO_BUCKETS = [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400];
/** Flattens (the copy of a whole image): seconds for a small lab image, hours for a large one. */
export const FLATTEN_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800];
/** Virtual size of a flattened image: 64 MiB … 4 TiB, by fours. */
export const IMAGE_SIZE_BUCKETS = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304].map((mib) => mib * 1024 * 1024);

/** The thaw layers a worker counts (the CLI's `operator` thaw is not a worker's). */
const WORKER_THAW_LAYERS: ThawLayer[] = ['workflow', 'compensation', 'guard', 'reconcile', 'sweeper', 'handoff', 'arrival'];

const FAILURE_TYPES = new Set<string>([...Object.values(FailureType), 'Timeout']);

/** The label a failure type gets: one of vmsnap's stable names, `other`, or `none` for a run that did not fail. */
export function failureTypeLabel(end: Pick<RunEnd, 'outcome' | 'failureType'>): string {
  if (end.outcome !== 'failed') return 'none';
  return end.failureType && FAILURE_TYPES.has(end.failureType) ? end.failureType : 'other';
}

/** Where a freeze window started, for the freezes this process started (bounded: windows end). */
const MAX_OPEN_WINDOWS = 256;

export class Metrics {
  readonly registry = new Registry();
  /** prom-client's process metrics (RSS, CPU, event loop, GC), one registry per process, when asked for. */
  private readonly process?: Registry;

  readonly runs = this.counter('vmsnap_runs_total', 'Snapshot runs (consistentSnapshot on this host\'s queue) that ended on this worker, by outcome (succeeded, failed, cancelled) and failure type (one of vmsnap\'s stable failure type names, Timeout, or other; none when the run did not fail).', ['outcome', 'failure_type']);
  readonly snapshots = this.counter('vmsnap_snapshots_total', 'Snapshots made by succeeded runs on this worker, by whether they are application-consistent (quiesced="true") or crash-consistent (quiesced="false"); a run that reused an earlier run\'s snapshot is not counted.', ['quiesced']);
  readonly lastSuccess = this.gauge('vmsnap_last_success_timestamp_seconds', 'When a snapshot run of this VM last succeeded on this worker (Unix seconds); max by (domain) across the fleet.', ['domain']);
  readonly lastQuiescedSuccess = this.gauge('vmsnap_last_quiesced_success_timestamp_seconds', 'When a snapshot run of this VM last succeeded quiesced (application-consistent) on this worker (Unix seconds); max by (domain) across the fleet.', ['domain']);
  readonly freezeWindow = this.histogram('vmsnap_freeze_window_seconds', 'Freeze windows ended on this host, in seconds: the freeze call\'s start to the thaw that ended it (the run\'s or its compensation\'s, the guard\'s, the sweeper\'s, reconcile\'s at start, or an arrival thaw\'s of a guest that migrated here frozen).', FREEZE_WINDOW_BUCKETS);
  readonly guestsFrozen = this.gauge('vmsnap_guests_frozen', 'Guests in a freeze window of vmsnap on this host right now (window entries of the freeze journal, read at scrape).');
  readonly oldestFreezeAge = this.gauge('vmsnap_oldest_freeze_age_seconds', 'Age of the oldest freeze window open on this host (its journal entry\'s arming time to the scrape), in seconds; 0 when none is open.');
  readonly oldestFreezeDeadline = this.gauge('vmsnap_oldest_freeze_deadline_seconds', 'Deadline of the oldest freeze window open on this host: how long after its arming its guard thaws it (the run\'s freezeDeadlineMs), in seconds; 0 when none is open. The guest is frozen past its deadline when vmsnap_oldest_freeze_age_seconds exceeds it.');
  readonly thaws = this.counter('vmsnap_thaws_total', 'Thaws that ended a freeze on this host, by the layer that thawed (workflow, compensation, guard, reconcile, sweeper, handoff, arrival).', ['layer']);
  readonly failures = this.counter('vmsnap_failures_total', 'Freeze and snapshot calls that failed on this host, by step (freeze, snapshot, snapshot-timeout).', ['step']);
  readonly snapshotDuration = this.histogram('vmsnap_snapshot_seconds', 'The snapshot call of every disk of a run (inside the freeze window), in seconds.', SNAPSHOT_BUCKETS);
  readonly mirrorRpo = this.histogram('vmsnap_mirror_rpo_seconds', 'DR runs (target.mirror) on this host whose point reached the DR site: replication lag from the freeze\'s start to the look that saw every disk\'s mirror snapshot complete there, in seconds.', MIRROR_RPO_BUCKETS);
  readonly preFlush = this.histogram('vmsnap_pre_flush_seconds', 'Pre-flushes on this host (a sync in the guest before its freeze, outside the window), by outcome (done, failed, timeout, skipped), in seconds.', SNAPSHOT_BUCKETS, ['outcome']);
  readonly clones = this.counter('vmsnap_clones_total', 'Clones of a snapshot made on this host (a run\'s image per disk).');
  readonly flattenDuration = this.histogram('vmsnap_flatten_seconds', 'Flattens (the copy of a clone\'s every block from its parent) on this host, by kind (snapshot: a run\'s image; restore: a restored disk), in seconds.', FLATTEN_BUCKETS, ['kind']);
  readonly flattenSize = this.histogram('vmsnap_flatten_size_bytes', 'Virtual size of each image flattened on this host, by kind (snapshot, restore), in bytes (its _sum: the virtual bytes flattened).', IMAGE_SIZE_BUCKETS, ['kind']);
  readonly verifications = this.counter('vmsnap_verifications_total', 'vmsnap verify verdicts recorded by this worker (any worker of the fleet queue records them), by verdict.', ['verdict']);
  readonly lastVerified = this.gauge('vmsnap_last_verified_timestamp_seconds', 'When a set of this VM was last verified, as recorded by this worker (Unix seconds); max by (domain) across the fleet.', ['domain']);
  readonly fleetHostAlive = this.gauge('vmsnap_fleet_host_alive', 'This host as the fleet index says it is at this scrape: 1 alive, 0 late, draining or lost.', ['host']);
  readonly fleetHostLastSeen = this.gauge('vmsnap_fleet_host_last_seen_timestamp_seconds', 'When the fleet index last heard this host\'s beat (Unix seconds).', ['host']);
  readonly fleetVm = this.gauge('vmsnap_fleet_vm', 'The VMs the fleet index places on this host (1 per VM).', ['host', 'domain']);
  readonly fleetRegistryUp = this.gauge('vmsnap_fleet_registry_up', '1 when this worker read the fleet index at this scrape; 0 when it could not (its fleet series are then dropped).');
  readonly cephUp = this.gauge('vmsnap_ceph_up', '1 once this worker\'s start-up has reached Ceph (predecessor fenced, snapshotter started); 0 while it is still waiting for the cluster.');
  readonly temporalUp = this.gauge('vmsnap_temporal_up', '1 while this worker is connected to Temporal and every one of its pollers runs; 0 while start-up waits for the server, and after a poller stopped.');
  readonly buildInfo = this.gauge('vmsnap_build_info', 'Always 1; its labels say which vmsnap (version) runs here on which Node.js (node).', ['version', 'node']);

  private sources: ((signal: AbortSignal, gaveUp: Promise<never>) => Promise<void>)[] = [];
  private readonly windowStarts = new Map<string, number>();

  constructor(opts: { processMetrics?: boolean } = {}) {
    if (opts.processMetrics) this.process = processRegistry();
  }

  onScrape<T>(source: ScrapeSource<T>): void {
    this.sources.push(async (signal, gaveUp) => {
      try {
        source.publish(this, await Promise.race([source.read(signal), gaveUp]));
      } catch (err) {
        source.unavailable(this, err);
      }
    });
  }

  /**
   * Refreshes every scrape source, all bounded by `timeoutMs`: a scrape must answer even when a
   * source hangs (Temporal unreachable), or the worker's own series go missing with it.
   */
  async collect(timeoutMs: number): Promise<void> {
    const ac = new AbortController();
    const gaveUp = new Promise<never>((_, reject) => ac.signal.addEventListener('abort', () => reject(ac.signal.reason as Error)));
    // Only the races observe it, and with no source there is none.
    gaveUp.catch(() => undefined);
    const timer = setTimeout(() => ac.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    try {
      await Promise.all(this.sources.map((s) => s(ac.signal, gaveUp)));
    } finally {
      clearTimeout(timer);
    }
  }

  /** The exposition: vmsnap's families, then the process's when this worker exports them. */
  async render(): Promise<string> {
    const own = await this.registry.metrics();
    return this.process ? own + '\n' + (await this.process.metrics()) : own;
  }

  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;

  /** Replaces every series of a gauge (a fleet host or VM that went away must not linger). */
  replace<L extends string>(gauge: Gauge<L>, series: { labels: Record<L, string>; value: number }[]): void {
    gauge.reset();
    for (const s of series) gauge.set(s.labels, s.value);
  }

  /** The freeze call of `freezeId` starts now (`atMs`, nowMs()): its window ends at its thaw. */
  freezeCallStarted(freezeId: string | undefined, atMs: number): void {
    if (!freezeId) return;
    if (this.windowStarts.size >= MAX_OPEN_WINDOWS) this.windowStarts.delete(this.windowStarts.keys().next().value!);
    this.windowStarts.set(freezeId, atMs);
  }

  /**
   * A freeze window journaled on this host ended at `endedAtMs` (wall ms): observed. It started at
   * its freeze call when this process made that call, else (the worker restarted meanwhile) when
   * its journal entry was armed, a little before the call.
   */
  freezeWindowEnded(entry: { freezeId?: string; frozenAt: number }, endedAtMs: number): void {
    const started = (entry.freezeId && this.windowStarts.get(entry.freezeId)) || entry.frozenAt;
    this.freezeWindowLeft(entry.freezeId);
    if (Number.isFinite(endedAtMs) && Number.isFinite(started)) this.freezeWindow.observe(Math.max(0, endedAtMs - started) / 1000);
  }

  /** A window that does not end on this host (its guest left frozen), or was never ours: nothing to observe here. */
  freezeWindowLeft(freezeId: string | undefined): void {
    if (freezeId) this.windowStarts.delete(freezeId);
  }

  /** A snapshot run ended on this worker (`atMs`: when, wall clock). */
  runEnded(end: RunEnd, atMs = Date.now()): void {
    this.runs.inc({ outcome: end.outcome, failure_type: failureTypeLabel(end) });
    if (end.outcome !== 'succeeded') return;
    if (!end.reused) this.snapshots.inc({ quiesced: String(!!end.quiesced) });
    if (!end.domain) return;
    this.lastSuccess.set({ domain: end.domain }, atMs / 1000);
    if (end.quiesced) this.lastQuiescedSuccess.set({ domain: end.domain }, atMs / 1000);
  }

  private counter<L extends string = never>(name: string, help: string, labelNames: L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  private gauge<L extends string = never>(name: string, help: string, labelNames: L[] = []): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.registry] });
  }

  private histogram<L extends string = never>(name: string, help: string, buckets: number[], labelNames: L[] = []): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
  }
}

let processMetrics: Registry | undefined;

/** Process metrics are the process's, whatever number of workers it runs: collected once. */
function processRegistry(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

/**
 * A host worker's metrics, with the series a dashboard needs before the first freeze declared up
 * front (no guest frozen, no thaw, no run yet, not connected yet, which version runs) and the
 * process's own.
 */
export function hostMetrics(): Metrics {
  const m = new Metrics({ processMetrics: true });
  m.buildInfo.set({ version: VERSION, node: process.version }, 1);
  m.guestsFrozen.set(0);
  m.oldestFreezeAge.set(0);
  m.oldestFreezeDeadline.set(0);
  m.cephUp.set(0);
  m.temporalUp.set(0);
  for (const layer of WORKER_THAW_LAYERS) m.thaws.inc({ layer }, 0);
  for (const step of ['freeze', 'snapshot', 'snapshot-timeout']) m.failures.inc({ step }, 0);
  m.runs.inc({ outcome: 'succeeded', failure_type: 'none' }, 0);
  m.runs.inc({ outcome: 'cancelled', failure_type: 'none' }, 0);
  // increase() cannot see a counter series born at 1: without these, the first failure of each
  // type after a worker start would never reach an alert.
  for (const type of FAILURE_TYPES) m.runs.inc({ outcome: 'failed', failure_type: type }, 0);
  m.runs.inc({ outcome: 'failed', failure_type: 'other' }, 0);
  for (const quiesced of ['true', 'false']) m.snapshots.inc({ quiesced }, 0);
  return m;
}
