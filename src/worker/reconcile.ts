import type { LibvirtClient } from '../libvirt';
import type { FreezeGuard, JournalEntry } from '../host/freeze-guard';
import { M } from '../host/metrics';
import type { Metrics } from '../host/metrics';
import type { Logger } from './logger';
import type { ThawLayer } from '../model/types';

export interface ThawReport {
  domain: string;
  owner: string;
  wasFrozen: boolean;
  layer: ThawLayer;
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
  await guard.release(entry.domainUuid);
  await guard.clear(entry.domainUuid);
  metrics.add(M.frozenGuests, -1);
  const report = { domain: entry.domainName, owner: entry.owner, wasFrozen, layer, frozenForMs: Date.now() - entry.frozenAt };
  log[wasFrozen ? 'warn' : 'info'](wasFrozen ? `thawed ${entry.domainName} (${layer})` : `journal entry for ${entry.domainName} cleared; guest was already thawed`, { ...report });
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
