import type { FreezeJournal, JournalEntry } from '../safety/freeze-journal';
import type { ScrapeSource } from '../host/metrics';
import type { Logger } from './logger';

/**
 * What the journal says about the freezes open on this host at a moment (`now`, wall ms): how many,
 * and the oldest one's age and deadline (both of the same window, so an alert can compare them).
 */
export function openWindows(entries: JournalEntry[], now: number): { frozen: number; oldestAgeSeconds: number; oldestDeadlineSeconds: number } {
  const windows = entries.filter((e) => e.mode === 'window');
  if (!windows.length) return { frozen: 0, oldestAgeSeconds: 0, oldestDeadlineSeconds: 0 };
  const oldest = windows.reduce((a, b) => (b.frozenAt < a.frozenAt ? b : a));
  return {
    frozen: windows.length,
    oldestAgeSeconds: Math.max(0, now - oldest.frozenAt) / 1000,
    // Both stamped from one wall-clock reading at arming: their difference is the run's freezeDeadlineMs.
    oldestDeadlineSeconds: Math.max(0, oldest.deadlineAt - oldest.frozenAt) / 1000,
  };
}

/**
 * `vmsnap_guests_frozen`, `vmsnap_oldest_freeze_age_seconds` and `_deadline_seconds` from the
 * freeze journal at each scrape: the journal is the host's record of every freeze vmsnap owes a
 * thaw (written before the freeze call, removed only once a thaw is proven), so it is right after a
 * worker restart too, and no step can forget to count. Read-only: a malformed entry is skipped, never moved. A journal that
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
      metrics.oldestFreezeDeadline.set(w.oldestDeadlineSeconds);
      if (down) log.info('freeze journal readable again for /metrics');
      down = false;
    },
    unavailable(metrics, err) {
      metrics.guestsFrozen.set(NaN);
      metrics.oldestFreezeAge.set(NaN);
      metrics.oldestFreezeDeadline.set(NaN);
      if (!down) log.warn('cannot read the freeze journal for /metrics; its gauges say NaN until it answers', { error: String(err) });
      down = true;
    },
  };
}
