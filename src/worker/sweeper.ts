import type { LibvirtClient } from '../libvirt';
import type { FreezeGuard } from '../host/freeze-guard';
import type { Metrics } from '../host/metrics';
import type { Logger } from './logger';
import { thawJournaled } from './reconcile';

/**
 * A worker-side loop, not a Temporal Schedule: it must work exactly when Temporal is unreachable
 * or the workflow is gone, and it needs this host's libvirt socket. It thaws any guest vmsnap
 * journaled as frozen whose deadline has passed — never a guest someone else froze.
 */
export class Sweeper {
  private timer?: NodeJS.Timeout;
  private running = false;

  constructor(
    private readonly libvirt: () => Promise<LibvirtClient>,
    private readonly guard: FreezeGuard,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly intervalMs: number,
    private readonly graceMs = 1000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async sweep(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    let thawed = 0;
    try {
      const now = Date.now();
      for (const entry of await this.guard.entries()) {
        if (now < entry.deadlineAt + this.graceMs) continue;
        try {
          const r = await thawJournaled(await this.libvirt(), this.guard, entry, 'sweeper', this.metrics, this.log);
          if (r.wasFrozen) thawed++;
        } catch (err) {
          this.log.error(`sweeper could not thaw ${entry.domainName}`, { error: String(err) });
        }
      }
    } finally {
      this.running = false;
    }
    return thawed;
  }
}
