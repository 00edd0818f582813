import type { LibvirtClient } from '../libvirt';
import type { FreezeGuard } from './freeze-guard';
import { isOverdue } from './freeze-journal';
import type { Metrics } from '../host/metrics';
import { withFields } from '../worker/logger';
import type { Logger } from '../worker/logger';
import { freezeFields } from '../model/run-log-fields';
import { Periodic } from '../worker/periodic';
import { thawJournaled } from './reconcile';
import { arrivalsVia, honourArrivals } from './arrivals';
import type { HandOff } from './reconcile';

/**
 * A worker-side loop, not a Temporal Schedule: it must work exactly when Temporal is unreachable
 * or the workflow is gone, and it needs this host's libvirt socket. It thaws any guest vmsnap
 * journaled as frozen whose deadline has passed (monotonic clock), and every late-freeze watch —
 * never a guest someone else froze. An entry it cannot resolve is kept for the next sweep.
 */
export class Sweeper {
  private readonly loop: Periodic<number>;
  /** Set once the worker reaches Temporal: entries of domains gone from this host need the fleet. */
  handOff?: HandOff;

  constructor(
    private readonly libvirt: () => Promise<LibvirtClient>,
    private readonly guard: FreezeGuard,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    intervalMs: number,
    private readonly graceMs = 1000,
    private readonly clockSkewMs = 1000,
  ) {
    this.loop = new Periodic(intervalMs, () => this.sweepOnce(), (err) => this.failed(err));
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
    this.cancelWake();
  }

  /** Stops and waits for a pass under way: the worker closes its connections after this. */
  halt(): Promise<void> {
    this.cancelWake();
    return this.loop.halt();
  }

  private wake?: { at: number; timer: NodeJS.Timeout };

  /** An extra pass at an arrived freeze's due time: it is thawed then, not up to an interval later. */
  private wakeAt(at: number | undefined): void {
    if (at === undefined || !Number.isFinite(at) || (this.wake && this.wake.at <= at)) return;
    this.cancelWake();
    const timer = setTimeout(() => {
      this.wake = undefined;
      void this.sweep();
    }, Math.max(0, at - Date.now()) + 50);
    timer.unref();
    this.wake = { at, timer };
  }

  private cancelWake(): void {
    if (this.wake) clearTimeout(this.wake.timer);
    this.wake = undefined;
  }

  /** Never throws: a sweep that fails is logged and the next one tries again. 0 while one is under way. */
  async sweep(): Promise<number> {
    try {
      return (await this.loop.run()) ?? 0;
    } catch (err) {
      this.failed(err);
      return 0;
    }
  }

  private async sweepOnce(): Promise<number> {
    let thawed = 0;
    for (const entry of await this.guard.entries()) {
      if (entry.mode === 'window' && !isOverdue(entry, this.graceMs)) continue;
      try {
        const r = await thawJournaled(await this.libvirt(), this.guard, entry, 'sweeper', this.metrics, this.log, this.handOff);
        if (r.wasFrozen) thawed++;
      } catch (err) {
        withFields(this.log, freezeFields(entry)).error(`sweeper could not prove ${entry.domainName} thawed; keeping its journal entry`, { error: String(err) });
      }
    }
    await this.guard.retryUnrecords();
    try {
      const pass = await honourArrivals(arrivalsVia(this.libvirt, this.guard, this.metrics, this.log, this.clockSkewMs));
      thawed += pass.honoured.filter((h) => h.thawedFilesystems > 0).length;
      this.wakeAt(pass.nextDueAt);
    } catch (err) {
      this.log.error('sweeper could not honour the freeze obligations of arrived guests; retrying next interval', { error: String(err) });
    }
    for (const late of await this.guard.takeLateThaws()) {
      this.metrics.thaws.inc({ layer: 'guard' });
      this.log.warn('the guard thawed a freeze that landed after its run gave up on it', { domainUuid: late.domainUuid, at: late.at, layer: 'guard' });
    }
    return thawed;
  }

  private failed(err: unknown): void {
    this.log.error('sweep failed; retrying next interval', { error: String(err) });
  }
}
