/**
 * A worker loop (sweeper, orphan reaper, fleet beat): one pass every `everyMs`. A pass that is
 * still under way when the next one is due makes that one skip instead of running beside it —
 * two sweeps thawing the same journal entry, or two reapers removing the same image, would race.
 * A pass the timer starts never rejects unhandled: its error goes to `onError` and the next
 * interval tries again. The timer is unref'd, so a loop never keeps the process alive on its own.
 */
export class Periodic<T> {
  private timer?: NodeJS.Timeout;
  private inFlight?: Promise<T>;

  constructor(
    private readonly everyMs: number,
    private readonly pass: () => Promise<T>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Idempotent: the worker starts its sweeper before Temporal is reachable and again in run(). */
  start(opts: { now?: boolean } = {}): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), this.everyMs);
    this.timer.unref();
    if (opts.now) this.tick();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Stops, then waits for a pass under way to end (whatever its outcome): what the pass uses —
   * a Temporal connection, libvirt, Ceph — may be closed only after that.
   */
  async halt(): Promise<void> {
    this.stop();
    await this.inFlight?.catch(() => undefined);
  }

  /**
   * One pass now, unless one is under way (then `undefined`). Its error is the caller's: a test or
   * an operator that asks for a pass must see it fail.
   */
  async run(): Promise<T | undefined> {
    if (this.inFlight) return undefined;
    try {
      this.inFlight = this.pass();
      return await this.inFlight;
    } finally {
      this.inFlight = undefined;
    }
  }

  private tick(): void {
    this.run().catch(this.onError);
  }
}
