/**
 * A private Prometheus for lab tests and the dashboard screenshot: Debian's `prometheus` binary
 * (lab/deps.sh installs the package and stops its service), run as a child process on a free port
 * of 127.0.0.1 with a temporary storage dir and a generated config that scrapes the given targets
 * as job `vmsnap` and loads the given rule files as they are. Never the packaged service on :9090.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './free-port';

export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';

export interface PrometheusOptions {
  /** `host:port` of each worker's /metrics. */
  targets: string[];
  /** Rule files, loaded unmodified (absolute paths). */
  ruleFiles?: string[];
  /** Scrape and rule evaluation interval (default 1 s: alerts in seconds, not minutes). */
  intervalSeconds?: number;
}

/** An alert as /api/v1/alerts lists it (pending or firing; inactive ones are not listed). */
export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface PromSeries {
  metric: Record<string, string>;
  values: [number, string][];
}

export class PrivatePrometheus {
  private readonly logs: string[] = [];
  private readonly exited: Promise<void>;

  private constructor(
    private readonly proc: ChildProcess,
    private readonly dir: string,
    readonly url: string,
  ) {
    const keep = (b: Buffer) => this.logs.push(b.toString());
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    this.exited = new Promise((r) => proc.once('exit', () => r()));
  }

  static async start(opts: PrometheusOptions): Promise<PrivatePrometheus> {
    if (!existsSync(PROMETHEUS_BIN)) throw new Error(`no Prometheus at ${PROMETHEUS_BIN}: bash lab/deps.sh installs Debian's prometheus package`);
    const interval = `${opts.intervalSeconds ?? 1}s`;
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-prometheus-'));
    // JSON is YAML: the config needs no YAML writer.
    const config = {
      global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
      rule_files: opts.ruleFiles ?? [],
      scrape_configs: [{ job_name: 'vmsnap', static_configs: [{ targets: opts.targets }] }],
    };
    writeFileSync(path.join(dir, 'prometheus.yml'), JSON.stringify(config, null, 2));
    const port = await freePort();
    const proc = spawn(
      PROMETHEUS_BIN,
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const prom = new PrivatePrometheus(proc, dir, `http://127.0.0.1:${port}`);
    try {
      await prom.ready(30_000);
    } catch (err) {
      await prom.stop();
      throw err;
    }
    return prom;
  }

  private async ready(ms: number): Promise<void> {
    const end = Date.now() + ms;
    let gone = false;
    void this.exited.then(() => (gone = true));
    while (Date.now() < end) {
      if (gone) throw new Error(`prometheus exited during start:\n${this.output()}`);
      const ok = await fetch(`${this.url}/-/ready`).then((r) => r.ok, () => false);
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`prometheus not ready in ${ms} ms:\n${this.output()}`);
  }

  /** What it logged (warnings and errors), for a failure message. */
  output(): string {
    return this.logs.join('').slice(-4000);
  }

  /** GET /api/v1/<endpoint>; its `data`, or an error carrying Prometheus's own. */
  async api<T>(endpoint: string, params: Record<string, string> = {}): Promise<T> {
    const res = await fetch(`${this.url}/api/v1/${endpoint}?${new URLSearchParams(params).toString()}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${endpoint} ${JSON.stringify(params)}: ${body.error ?? res.status}`);
    return body.data;
  }

  async alerts(): Promise<PromAlert[]> {
    return (await this.api<{ alerts: PromAlert[] }>('alerts')).alerts;
  }

  async query(expr: string, time?: number): Promise<PromSample[]> {
    const data = await this.api<{ resultType: string; result: PromSample[] }>('query', { query: expr, ...(time !== undefined ? { time: String(time) } : {}) });
    return data.result;
  }

  async queryRange(expr: string, start: number, end: number, step: number): Promise<PromSeries[]> {
    const data = await this.api<{ result: PromSeries[] }>('query_range', { query: expr, start: String(start), end: String(end), step: String(step) });
    return data.result;
  }

  /** SIGTERM (SIGKILL after 10 s), then its storage dir goes. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
      await this.exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
