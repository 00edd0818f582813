import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { need } from '../../support/lab/env';

const ROOT = path.resolve(__dirname, '../..');

/**
 * A host worker as its own process (`vmsnap worker`), so the fault suite can SIGKILL it and
 * restart it as a supervisor would. Its state dir (freeze journal) survives restarts.
 */
export class WorkerProcess {
  /** Every worker a test file started: test/setup/retire-hosts.ts retires their hosts when the file ends. */
  static readonly started = new Set<WorkerProcess>();
  /** The last process's pid: its identity is the one the registry may hold for this host. */
  lastPid?: number;
  /** How the last process ended: a signal or exit code, "(asked)" when the test stopped it. */
  lastExit?: string;
  readonly stateDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-faults-'));
  readonly faultDir = path.join(this.stateDir, 'faults');
  private proc?: ChildProcess;
  private exited?: Promise<void>;
  readonly logs: string[] = [];
  /** Exits the test did not ask for (a crash): code or signal, and the log tail, newest last. */
  readonly unexpectedExits: string[] = [];
  private stopping = false;
  /** When the process was spawned, and when it printed its first line (the worker is starting). */
  spawnedAt = 0;
  firstLogAt = 0;

  constructor(
    private readonly vars: Record<string, string>,
    readonly host: string,
    /** More environment for the worker, e.g. Temporal TLS settings. */
    private readonly extraEnv: Record<string, string> = {},
  ) {
    mkdirSync(this.faultDir, { recursive: true });
  }

  get running(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get taskQueue(): string {
    return `vmsnap-${this.host}`;
  }

  /** Starts the worker; resolves once it logged `readyText` (default: "worker started"). */
  async start(fault: { points?: string[]; pauseMs?: number } = {}, readyText = '"worker started"'): Promise<void> {
    rmSync(this.faultDir, { recursive: true, force: true });
    mkdirSync(this.faultDir, { recursive: true });
    const env = {
      ...process.env,
      VMSNAP_TEMPORAL_ADDRESS: need(this.vars, 'TEMPORAL_ADDRESS'),
      VMSNAP_LIBVIRT_URI: need(this.vars, 'LIBVIRT_DEFAULT_URI'),
      ...(this.vars.VMSNAP_LIBVIRT_STATUS_DIR ? { VMSNAP_LIBVIRT_STATUS_DIR: this.vars.VMSNAP_LIBVIRT_STATUS_DIR } : {}),
      VMSNAP_CEPH_CONF: need(this.vars, 'CEPH_CONF'),
      VMSNAP_CEPH_ID: this.vars.CEPH_VMSNAP_ID ?? 'admin',
      VMSNAP_CEPH_KEYRING: this.vars.CEPH_VMSNAP_KEYRING ?? need(this.vars, 'CEPH_KEYRING'),
      ...(this.vars.VMSNAP_RESTORE_KEY_FILE ? { VMSNAP_RESTORE_KEY_FILE: this.vars.VMSNAP_RESTORE_KEY_FILE } : {}),
      VMSNAP_HOST: this.host,
      VMSNAP_STATE_DIR: this.stateDir,
      VMSNAP_METRICS_PORT: '0',
      VMSNAP_SWEEP_INTERVAL_MS: '1000',
      VMSNAP_REAP_INTERVAL_MS: '2000',
      VMSNAP_FAULT_DIR: this.faultDir,
      VMSNAP_FAULT_POINTS: (fault.points ?? []).join(','),
      ...(fault.pauseMs !== undefined ? { VMSNAP_FAULT_PAUSE_MS: String(fault.pauseMs) } : { VMSNAP_FAULT_PAUSE_MS: '' }),
      ...this.extraEnv,
    };
    const firstLine = this.logs.length;
    this.spawnedAt = Date.now();
    this.firstLogAt = 0;
    appendFileSync(path.join(this.stateDir, 'worker.log'), `--- start ${new Date().toISOString()}\n`);
    const proc = spawn(process.execPath, [path.join(ROOT, 'bin/vmsnap.js'), 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    this.lastPid = proc.pid;
    WorkerProcess.started.add(this);
    this.stopping = false;
    this.exited = new Promise((r) =>
      proc.once('exit', (code, signal) => {
        this.lastExit = `${signal ?? `code ${code}`}${this.stopping ? ' (asked)' : ''}`;
        appendFileSync(path.join(this.stateDir, 'worker.log'), `--- exit ${new Date().toISOString()} pid ${proc.pid}: ${this.lastExit}\n`);
        if (!this.stopping) {
          const why = `worker ${this.host} (pid ${proc.pid}) exited on its own: ${signal ?? `code ${code}`}`;
          this.unexpectedExits.push(why);
          console.error(`${why} (log: ${path.join(this.stateDir, 'worker.log')})\n${this.logs.join('').slice(-4000)}`);
        }
        r();
      }),
    );
    let started!: () => void;
    const ready = new Promise<void>((r) => (started = r));
    const onData = (b: Buffer) => {
      const text = b.toString();
      this.firstLogAt ||= Date.now();
      this.logs.push(text);
      // Kept on disk across restarts: the post-mortem of a worker that died inside a long run.
      appendFileSync(path.join(this.stateDir, 'worker.log'), text);
      if (this.logs.join('').includes(readyText)) started();
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    await Promise.race([
      ready,
      this.exited.then(() => {
        throw new Error(`worker ${this.host} (pid ${proc.pid}) exited during start (${this.lastExit}); its output:\n${this.logs.slice(firstLine).join('').slice(-3000)}`);
      }),
      sleep(60_000).then(() => {
        throw new Error(`worker did not start in 60 s:\n${this.logs.join('').slice(-3000)}`);
      }),
    ]);
  }

  /** Resolves with the exit code once the process exits. */
  async exitCode(): Promise<number | null> {
    await this.exited;
    return this.proc?.exitCode ?? null;
  }

  /** SIGKILL: no shutdown hooks, no compensation, like a host crash of the process. */
  async kill(): Promise<void> {
    this.stopping = true;
    this.proc?.kill('SIGKILL');
    await this.exited;
  }

  /**
   * SIGTERM, and SIGKILL after 40 s if it has not exited. The escalation is bound to this process
   * and cancelled on its exit: an uncancelled one SIGKILLed the *next* incarnation 40 s after a
   * clean stop (chaos runs 24 and 9: a restarted worker gone mid-run, its queue unpolled 4 min).
   */
  async stop(): Promise<void> {
    const proc = this.proc;
    const exited = this.exited;
    if (!proc || !exited || proc.exitCode !== null || proc.signalCode !== null) return;
    this.stopping = true;
    proc.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const escalate = new Promise<void>((r) => {
      timer = setTimeout(() => {
        proc.kill('SIGKILL');
        r(exited);
      }, 40_000);
    });
    await Promise.race([exited, escalate]);
    clearTimeout(timer);
  }

  /**
   * Waits until the worker reaches a fault point (its marker file appears). Two minutes: a run's
   * turn of a fleet limit can wait up to one long poll (60 s) when its queue's task was backlogged
   * while no worker polled the fleet queue (CI, 2026-12-06: the demo's one-shot worker left the
   * cluster's queue mid-task; the next worker got it 59 s after it started polling).
   */
  async reached(point: string, timeoutMs = 120_000): Promise<number> {
    const file = path.join(this.faultDir, point.replace(':', '_'));
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      if (existsSync(file)) return Number(readFileSync(file, 'utf8'));
      await sleep(20);
    }
    throw new Error(`worker never reached fault point ${point}:\n${this.logs.join('').slice(-3000)}`);
  }

  /** Thaw layers the worker logged (compensation/workflow from activities, reconcile/sweeper/guard). */
  layers(): string[] {
    const out: string[] = [];
    for (const line of this.logs.join('').split('\n')) {
      const m = /"layer":"([a-z]+)"/.exec(line);
      if (m && m[1] !== 'none') out.push(m[1]);
    }
    return out;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
