/**
 * vmsnap's own metrics, kept in-process and rendered in Prometheus text format by the worker's
 * HTTP endpoint. Small on purpose: counters, gauges and fixed-bucket histograms.
 */
import { VERSION } from '../version';

type Labels = Record<string, string>;

const key = (name: string, labels: Labels) =>
  `${name}{${Object.entries(labels)
    .sort()
    .map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`)
    .join(',')}}`;

const BUCKETS_MS = [25, 50, 100, 150, 200, 300, 500, 750, 1000, 2000, 5000, 10000, 30000];

/**
 * Gauges whose truth lives elsewhere (the fleet registry), read when /metrics is scraped rather
 * than on a timer of the worker's own: as fresh as the scrape, and no reads while nobody looks.
 */
export interface ScrapeSource<T> {
  /** Should stop when `signal` aborts; a scrape stops waiting for it then either way. */
  read(signal: AbortSignal): Promise<T>;
  publish(metrics: Metrics, value: T): void;
  /** The read failed or did not answer in time: what the source's gauges say instead. */
  unavailable(metrics: Metrics, err: unknown): void;
}

export class Metrics {
  private counters = new Map<string, number>();
  private gauges = new Map<string, number>();
  private hists = new Map<string, { buckets: number[]; sum: number; count: number }>();
  private help = new Map<string, [string, string]>();
  private sources: ((signal: AbortSignal, gaveUp: Promise<never>) => Promise<void>)[] = [];

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

  inc(name: string, labels: Labels = {}, by = 1): void {
    this.describe(name, 'counter');
    const k = key(name, labels);
    this.counters.set(k, (this.counters.get(k) ?? 0) + by);
  }

  set(name: string, value: number, labels: Labels = {}): void {
    this.describe(name, 'gauge');
    this.gauges.set(key(name, labels), value);
  }

  /** Replaces every series of a gauge (a fleet host or VM that went away must not linger). */
  replace(name: string, series: { labels: Labels; value: number }[]): void {
    this.describe(name, 'gauge');
    for (const k of [...this.gauges.keys()]) if (k.startsWith(`${name}{`)) this.gauges.delete(k);
    for (const s of series) this.gauges.set(key(name, s.labels), s.value);
  }

  add(name: string, delta: number, labels: Labels = {}): void {
    this.describe(name, 'gauge');
    const k = key(name, labels);
    this.gauges.set(k, (this.gauges.get(k) ?? 0) + delta);
  }

  observe(name: string, ms: number, labels: Labels = {}): void {
    this.describe(name, 'histogram');
    const k = key(name, labels);
    const h = this.hists.get(k) ?? { buckets: BUCKETS_MS.map(() => 0), sum: 0, count: 0 };
    BUCKETS_MS.forEach((b, i) => {
      if (ms <= b) h.buckets[i]++;
    });
    h.sum += ms;
    h.count++;
    this.hists.set(k, h);
  }

  render(): string {
    const lines: string[] = [];
    for (const [name, [type]] of this.help) lines.push(`# TYPE ${name} ${type}`);
    for (const [k, v] of this.counters) lines.push(`${k} ${v}`);
    for (const [k, v] of this.gauges) lines.push(`${k} ${v}`);
    for (const [k, h] of this.hists) {
      const [name, rest] = [k.slice(0, k.indexOf('{')), k.slice(k.indexOf('{') + 1, -1)];
      const sep = rest ? ',' : '';
      BUCKETS_MS.forEach((b, i) => lines.push(`${name}_bucket{${rest}${sep}le="${b}"} ${h.buckets[i]}`));
      lines.push(`${name}_bucket{${rest}${sep}le="+Inf"} ${h.count}`);
      lines.push(`${name}_sum{${rest}} ${h.sum}`);
      lines.push(`${name}_count{${rest}} ${h.count}`);
    }
    return lines.join('\n') + '\n';
  }

  private describe(name: string, type: string): void {
    if (!this.help.has(name)) this.help.set(name, [type, '']);
  }
}

export const M = {
  freezeWindow: 'vmsnap_freeze_window_ms',
  frozenGuests: 'vmsnap_frozen_guests',
  thaws: 'vmsnap_thaws_total',
  snapshotMs: 'vmsnap_snapshot_ms',
  flattenMs: 'vmsnap_flatten_ms',
  failures: 'vmsnap_failures_total',
  /** vmsnap verify verdicts recorded by this worker (any worker of the fleet queue records them), by `verdict`. */
  verifications: 'vmsnap_verifications_total',
  /** When a set of `domain` was last verified (by this worker): `max by (domain)` across the fleet. */
  lastVerified: 'vmsnap_last_verified_timestamp_seconds',
  /** This host as the fleet index says it is at this scrape (each host exports its own: O(1) per scrape). */
  fleetHostAlive: 'vmsnap_fleet_host_alive',
  fleetHostLastSeen: 'vmsnap_fleet_host_last_seen_seconds',
  fleetVm: 'vmsnap_fleet_vm',
  /** 0: this worker could not read the fleet index at this scrape, and shows no fleet series. */
  fleetRegistryUp: 'vmsnap_fleet_registry_up',
  /** Always 1; its `version` label says which vmsnap runs here (Prometheus's build_info convention). */
  buildInfo: 'vmsnap_build_info',
} as const;

/**
 * A host worker's metrics, with the series a dashboard needs before the first freeze declared up
 * front: no guest frozen, no thaw yet, and which version runs.
 */
export function hostMetrics(): Metrics {
  const metrics = new Metrics();
  metrics.set(M.buildInfo, 1, { version: VERSION });
  metrics.set(M.frozenGuests, 0);
  metrics.inc(M.thaws, { layer: 'workflow' }, 0);
  return metrics;
}
