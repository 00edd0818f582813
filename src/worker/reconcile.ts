import type { LibvirtClient } from '../libvirt';
import type { FreezeGuard, JournalEntry } from '../host/freeze-guard';
import { M } from '../host/metrics';
import type { Metrics } from '../host/metrics';
import type { Logger } from './logger';
import type { ThawLayer } from '../model/types';

export interface ThawReport {
  domain: string;
  owner: string;
  /** Still frozen when this layer looked (and so thawed by it). */
  wasFrozen: boolean;
  /** Which layer thawed the guest: this one, the host guard before it, or nobody (never frozen). */
  thawedBy: ThawLayer | 'none';
  frozenForMs: number;
}

/**
 * Thaws a journaled guest if it is still frozen and forgets it. Used at worker start (reconcile:
 * whatever a dead worker left frozen) and by the sweeper (freezes past their deadline).
 */
export async function thawJournaled(
  lv: LibvirtClient,
  guard: FreezeGuard,
  entry: JournalEntry,
  layer: ThawLayer,
  metrics: Metrics,
  log: Logger,
): Promise<ThawReport> {
  // Stop the watchdog first, and learn whether it already fired.
  const { guardFiredAt } = await guard.release(entry.domainUuid);
  const dom = await lv.lookupDomainByUuid(entry.domainUuid).catch(() => undefined);
  let wasFrozen = false;
  if (dom) {
    const status = await lv.fsFreezeStatus(dom, 5);
    if (status === 'frozen') {
      wasFrozen = true;
      await lv.fsThaw(dom);
      const after = await lv.fsFreezeStatus(dom, 5);
      if (after !== 'thawed') throw new Error(`${entry.domainName} still ${after} after thaw`);
      metrics.inc(M.thaws, { layer });
    }
  }
  await guard.clear(entry.domainUuid);
  metrics.add(M.frozenGuests, -1);
  const thawedBy: ThawReport['thawedBy'] = wasFrozen ? layer : guardFiredAt ? 'guard' : 'none';
  if (thawedBy === 'guard') metrics.inc(M.thaws, { layer: 'guard' });
  const report: ThawReport = { domain: entry.domainName, owner: entry.owner, wasFrozen, thawedBy, frozenForMs: Date.now() - entry.frozenAt };
  log[thawedBy === 'none' ? 'info' : 'warn'](`journaled freeze of ${entry.domainName} resolved: thawed by ${thawedBy}`, { ...report, layer: thawedBy });
  return report;
}

/** At worker start: every journaled freeze belongs to a process that is gone. */
export async function reconcile(lv: LibvirtClient, guard: FreezeGuard, metrics: Metrics, log: Logger): Promise<ThawReport[]> {
  const out: ThawReport[] = [];
  for (const entry of await guard.entries()) {
    try {
      out.push(await thawJournaled(lv, guard, entry, 'reconcile', metrics, log));
    } catch (err) {
      log.error(`reconcile could not thaw ${entry.domainName}; the sweeper will retry`, { error: String(err) });
    }
  }
  return out;
}
