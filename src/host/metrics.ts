/**
 * vmsnap's own metrics, kept in-process and rendered in Prometheus text format by the worker's
 * HTTP endpoint. Small on purpose: counters, gauges and fixed-bucket histograms.
 */
type Labels = Record<string, string>;

const key = (name: string, labels: Labels) =>
  `${name}{${Object.entries(labels)
    .sort()
    .map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`)
    .join(',')}}`;

const BUCKETS_MS = [25, 50, 100, 150, 200, 300, 500, 750, 1000, 2000, 5000, 10000, 30000];

export class Metrics {
  private counters = new Map<string, number>();
  private gauges = new Map<string, number>();
  private hists = new Map<string, { buckets: number[]; sum: number; count: number }>();
  private help = new Map<string, [string, string]>();

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
  /** The fleet as the registry saw it at this worker's last beat (every host, not only this one). */
  fleetHostAlive: 'vmsnap_fleet_host_alive',
  fleetHostLastSeen: 'vmsnap_fleet_host_last_seen_seconds',
  fleetVm: 'vmsnap_fleet_vm',
} as const;
