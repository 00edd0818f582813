import type { FreezeJournal, JournalEntry } from '../safety/freeze-journal';
import type { ScrapeSource } from '../host/metrics';
import type { Logger } from './logger';

/** What the journal says about the freezes open on this host at a moment (`now`, wall ms). */
export function openWindows(entries: JournalEntry[], now: number): { frozen: number; oldestAgeSeconds: number } {
  const windows = entries.filter((e) => e.mode === 'window');
  const oldest = Math.min(...windows.map((e) => e.frozenAt));
  return { frozen: windows.length, oldestAgeSeconds: windows.length ? Math.max(0, now - oldest) / 1000 : 0 };
}

/**
 * `vmsnap_guests_frozen` and `vmsnap_oldest_freeze_age_seconds` from the freeze journal at each
 * scrape: the journal is the host's record of every freeze vmsnap owes a thaw (written before the
 * freeze call, removed only once a thaw is proven), so it is right after a worker restart too, and
 * no step can forget to count. Read-only: a malformed entry is skipped, never moved. A journal that
 * cannot be read shows NaN (unknown), not 0.
 */
export function journalGauges(journal: Pick<FreezeJournal, 'peek'>, log: Pick<Logger, 'warn' | 'info'>, now: () => number = Date.now): ScrapeSource<JournalEntry[]> {
  let down = false;
  return {
    read: () => journal.peek(),
    publish(metrics, entries) {
      const w = openWindows(entries, now());
      metrics.guestsFrozen.set(w.frozen);
      metrics.oldestFreezeAge.set(w.oldestAgeSeconds);
      if (down) log.info('freeze journal readable again for /metrics');
      down = false;
    },
    unavailable(metrics, err) {
      metrics.guestsFrozen.set(NaN);
      metrics.oldestFreezeAge.set(NaN);
      if (!down) log.warn('cannot read the freeze journal for /metrics; its gauges say NaN until it answers', { error: String(err) });
      down = true;
    },
  };
}
