import type { LibvirtClient } from '../libvirt';
import type { FreezeGuard, JournalEntry } from '../host/freeze-guard';
import { isOverdue } from '../host/freeze-journal';
import { restoreAgentTimeout } from '../host/agent-timeout-restore';
import { thawAndConfirm } from '../host/thaw-confirm';
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
  /** A late-freeze watch that has not ended stays in the journal. */
  kept: boolean;
  gone?: string;
}

/**
 * Resolves one journaled freeze through the host's one thaw-and-confirm, then forgets it — unless
 * it is a watch that has not ended yet. Throws, keeping the entry, whenever the thaw cannot be
 * proven (libvirtd unreachable, agent hung): the entry is the only thing left that knows the
 * guest may be frozen. Used at worker start (reconcile) and by the sweeper.
 */
export async function thawJournaled(
  lv: LibvirtClient,
  guard: FreezeGuard,
  entry: JournalEntry,
  layer: ThawLayer,
  metrics: Metrics,
  log: Logger,
  handOff?: HandOff,
): Promise<ThawReport> {
  const r = await thawAndConfirm(lv, entry.domainUuid, entry.agentTimeoutSec);
  if (r.outcome === 'gone') {
    // Gone from this host may mean running frozen on another (live migration): only the fleet
    // can say, so the entry stays until a hand-off answers.
    if (!handOff) throw new Error(`${entry.domainName} is gone from this host (${r.reason}); kept until the fleet can thaw it where it runs`);
    const where = await handOff(entry);
    log.warn(`journaled freeze of ${entry.domainName} handed off: ${where.outcome === 'thawed' ? `thawed on ${where.host}` : where.message}`, { domain: entry.domainName, owner: entry.owner, layer: 'handoff' });
  }
  const wasFrozen = r.outcome === 'thawed' && r.wasFrozen;
  if (wasFrozen) metrics.inc(M.thaws, { layer });
  const base = { domain: entry.domainName, owner: entry.owner, frozenForMs: Date.now() - entry.frozenAt, ...(r.outcome === 'gone' ? { gone: r.reason } : {}) };
  if (entry.mode === 'watch' && !isOverdue(entry) && r.outcome === 'thawed') {
    if (wasFrozen) log.warn(`late freeze of ${entry.domainName} thawed by ${layer}; still watching`, { ...base, layer });
    return { ...base, wasFrozen, thawedBy: wasFrozen ? layer : 'none', kept: true };
  }
  const { guardFiredAt } = await guard.release(entry.domainUuid);
  if (r.outcome === 'thawed' && entry.mode === 'window') {
    const warning = await restoreAgentTimeout(lv, entry);
    if (warning) log.warn(warning, { domain: entry.domainName });
  }
  await guard.clear(entry.domainUuid);
  if (entry.mode === 'window') metrics.add(M.frozenGuests, -1);
  const thawedBy: ThawReport['thawedBy'] = wasFrozen ? layer : guardFiredAt ? 'guard' : 'none';
  if (thawedBy === 'guard') metrics.inc(M.thaws, { layer: 'guard' });
  const report: ThawReport = { ...base, wasFrozen, thawedBy, kept: false };
  log[thawedBy === 'none' ? 'info' : 'warn'](`journaled freeze of ${entry.domainName} resolved: thawed by ${thawedBy}`, { ...report, layer: thawedBy });
  return report;
}

/**
 * At worker start, with the state-dir lock held (so its previous holder is dead): every window
 * entry belongs to a process that is gone and is resolved now, deadline or not; watches go on.
 */
/** Asks the fleet to thaw a domain this host no longer runs (src/worker/handoff.ts). */
export type HandOff = (entry: JournalEntry) => Promise<{ outcome: 'thawed'; host: string } | { outcome: 'not-running'; message: string }>;

export async function reconcile(libvirt: () => Promise<LibvirtClient>, guard: FreezeGuard, metrics: Metrics, log: Logger): Promise<ThawReport[]> {
  const out: ThawReport[] = [];
  for (const entry of await guard.entries()) {
    try {
      out.push(await thawJournaled(await libvirt(), guard, entry, 'reconcile', metrics, log));
    } catch (err) {
      log.error(`reconcile could not prove ${entry.domainName} thawed; the entry is kept and the sweeper retries`, { error: String(err) });
    }
  }
  return out;
}
