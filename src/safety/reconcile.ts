import type { LibvirtClient } from '../libvirt';
import type { FreezeGuard, JournalEntry } from './freeze-guard';
import { isOverdue } from './freeze-journal';
import { restoreAgentTimeout } from './agent-timeout-restore';
import { thawAndConfirm } from './thaw-confirm';
import type { Metrics } from '../host/metrics';
import { withFields } from '../worker/logger';
import type { Logger } from '../worker/logger';
import { freezeFields } from '../model/run-log-fields';
import type { ThawLayer } from '../model/types';
import type { FreezeObligation } from '../model/freeze-obligation';
import { arrivalsVia, honourArrivals } from './arrivals';

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
  /** The hand-off workflow that now holds the freeze of a domain that left this host. */
  handedOffTo?: string;
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
  runLog: Logger,
  handOff?: HandOff,
): Promise<ThawReport> {
  const log = withFields(runLog, freezeFields(entry));
  if (entry.mode === 'watch') {
    const other = await guard.otherRunsWindow(lv, entry);
    if (other) return leaveOtherRunsWindow(guard, entry, other, layer, log);
  }
  const r = await thawAndConfirm(lv, entry.domainUuid, entry.agentTimeoutSec);
  if (r.outcome === 'gone') {
    // Gone from this host may mean running frozen on another (live migration). This host's part
    // ends only once the fleet's hand-off holds the freeze; its Ceph obligation stays open until a
    // thaw is proven where the guest runs (that host's arrival guard or worker, or the hand-off).
    if (!handOff) throw new Error(`${entry.domainName} is gone from this host (${r.reason}); kept until the worker can hand its freeze to the fleet`);
    const id = await handOff(entry);
    await guard.handOver(entry.domainUuid);
    if (entry.mode === 'window') metrics.freezeWindowLeft(entry.freezeId);
    const report: ThawReport = { domain: entry.domainName, owner: entry.owner, frozenForMs: Date.now() - entry.frozenAt, wasFrozen: false, thawedBy: 'none', kept: false, gone: r.reason, handedOffTo: id };
    log.warn(`journaled freeze of ${entry.domainName} handed over: ${r.reason}; hand-off ${id} and the host it runs on now end it`, { ...report, layer: 'handoff' });
    return report;
  }
  const wasFrozen = r.outcome === 'thawed' && r.wasFrozen;
  if (wasFrozen) metrics.thaws.inc({ layer });
  const base = { domain: entry.domainName, owner: entry.owner, frozenForMs: Date.now() - entry.frozenAt };
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
  const thawedBy: ThawReport['thawedBy'] = wasFrozen ? layer : guardFiredAt ? 'guard' : 'none';
  if (entry.mode === 'window') {
    // Ended by this thaw or by the guard's before it; a guest found thawed by somebody else ended
    // its window at a time nobody recorded.
    if (wasFrozen) metrics.freezeWindowEnded(entry, r.thawedAt);
    else if (guardFiredAt) metrics.freezeWindowEnded(entry, guardFiredAt);
    else metrics.freezeWindowLeft(entry.freezeId);
  }
  if (thawedBy === 'guard') metrics.thaws.inc({ layer: 'guard' });
  const report: ThawReport = { ...base, wasFrozen, thawedBy, kept: false };
  log[thawedBy === 'none' ? 'info' : 'warn'](`journaled freeze of ${entry.domainName} resolved: thawed by ${thawedBy}`, { ...report, layer: thawedBy });
  return report;
}

/**
 * A watch found its guest frozen by another run's recorded window (src/safety/late-freeze.ts): that
 * run's guard ends it, and a thaw here would cut its snapshot short. The watch goes on until its
 * end, when it is forgotten without a thaw.
 */
async function leaveOtherRunsWindow(guard: FreezeGuard, entry: JournalEntry, other: FreezeObligation, layer: ThawLayer, log: Logger): Promise<ThawReport> {
  const base = { domain: entry.domainName, owner: entry.owner, frozenForMs: Date.now() - entry.frozenAt, wasFrozen: false, thawedBy: 'none' as const };
  const kept = !isOverdue(entry);
  if (!kept) {
    await guard.release(entry.domainUuid);
    await guard.clear(entry.domainUuid);
  }
  log.info(`late-freeze watch of ${entry.domainName} left another run's freeze window to its guard${kept ? '; still watching' : '; the watch ended'}`, {
    ...base,
    otherOwner: other.owner,
    otherFreezeId: other.freezeId,
    layer,
  });
  return { ...base, kept };
}

/** Starts (or joins) the fleet's hand-off of a journaled freeze whose domain left this host; returns its workflow id. */
export type HandOff = (entry: JournalEntry) => Promise<string>;

/**
 * At worker start, with the state-dir lock held (so its previous holder is dead): every window
 * entry belongs to a process that is gone and is resolved now, deadline or not; watches go on.
 * Then the freezes other hosts made of guests that run here now (arrivals), before Temporal.
 */
export async function reconcile(libvirt: () => Promise<LibvirtClient>, guard: FreezeGuard, metrics: Metrics, log: Logger, clockSkewMs = 1000): Promise<ThawReport[]> {
  const out: ThawReport[] = [];
  for (const entry of await guard.entries()) {
    try {
      out.push(await thawJournaled(await libvirt(), guard, entry, 'reconcile', metrics, log));
    } catch (err) {
      withFields(log, freezeFields(entry)).error(`reconcile could not prove ${entry.domainName} thawed; the entry is kept and the sweeper retries`, { error: String(err) });
    }
  }
  try {
    await honourArrivals(arrivalsVia(libvirt, guard, metrics, log, clockSkewMs));
  } catch (err) {
    log.error('reconcile could not read the freeze obligations; the sweeper retries', { error: String(err) });
  }
  return out;
}
