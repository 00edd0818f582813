import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { freezeGuest } from '../../activities/freeze';
import { thawGuest } from '../../activities/thaw';
import type { ActivityDeps } from '../../activities/deps';
import { bootId, monoMs } from '../../src/host/clock';
import { FreezeJournal } from '../../src/safety/freeze-journal';
import type { JournalEntry } from '../../src/safety/freeze-journal';
import { Metrics, hostMetrics } from '../../src/host/metrics';
import type { FreezeGuard } from '../../src/safety/freeze-guard';
import { LibvirtError } from '../../src/libvirt';
import type { LibvirtClient } from '../../src/libvirt';
import { journalGauges } from '../../src/worker/journal-metrics';
import { thawJournaled } from '../../src/safety/reconcile';
import { jsonLogger } from '../../src/worker/logger';
import { sample } from '../helpers/exposition';

/*
 * vmsnap_freeze_window_seconds is observed where a window ends — the thaw activity (the run's or
 * its compensation's), or the sweeper and reconcile at start — once per freeze; and the journal
 * gauges say, at each scrape, how many guests are in a window now and for how long the oldest.
 */

const UUID = '5d0c8c4e-1f2a-4b3c-9d4e-5f6a7b8c9d0e';
const quiet = jsonLogger({ host: 'unit' }, { write: () => true } as unknown as NodeJS.WritableStream);

function entry(o: Partial<JournalEntry> = {}): JournalEntry {
  const now = Date.now();
  return {
    domainUuid: UUID,
    domainName: 'g',
    owner: 'wf/run',
    mode: 'window',
    frozenAt: now,
    deadlineAt: now + 60_000,
    deadlineMono: monoMs() + 60_000,
    bootId: bootId(),
    agentTimeoutSec: 3,
    guardId: 'guard-1',
    freezeId: 'f-1',
    ...o,
  };
}

/** A guest (its agent freezes and thaws `filesystems`) and this host's guard holding its journal entry in memory. */
function host(o: { armedMsAgo?: number; guardFiredAt?: number } = {}) {
  const guest = { frozen: 0, gone: false };
  let journaled: JournalEntry | undefined;
  const noDomain = () => new LibvirtError({ code: 42, domain: 10, level: 2, message: 'Domain not found', procedure: 'REMOTE_PROC_DOMAIN_LOOKUP_BY_UUID' });
  const lv = {
    async lookupDomainByUuid(uuid: string) {
      if (guest.gone) throw noDomain();
      return { uuid, name: 'g', id: 1 };
    },
    async fsFreezeStatus() {
      return guest.frozen ? ('frozen' as const) : ('thawed' as const);
    },
    async setAgentResponseTimeout() {},
    async fsFreeze() {
      guest.frozen = 2;
      return 2;
    },
    async fsThaw() {
      const n = guest.frozen;
      guest.frozen = 0;
      return n;
    },
    async getDomainState() {
      return { state: 'running', reason: 0 };
    },
  } as unknown as LibvirtClient;
  const guard = {
    async arm() {
      // The arm (journal fsync, watchdog, the obligation in Ceph) ends before the freeze call.
      journaled = entry({ frozenAt: Date.now() - (o.armedMsAgo ?? 0) });
      return journaled;
    },
    read: async () => journaled,
    release: async () => (o.guardFiredAt ? { guardFiredAt: o.guardFiredAt } : {}),
    clear: async () => void (journaled = undefined),
    handOver: async () => void (journaled = undefined),
    resolve: async () => undefined,
  } as unknown as FreezeGuard;
  const deps = (metrics: Metrics) =>
    ({
      host: 'h',
      libvirt: async () => lv,
      libvirtStatusDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-status-')),
      guard,
      metrics,
      log: quiet,
    }) as unknown as ActivityDeps;
  const req = { domainUuid: UUID, domainName: 'g', agentTimeoutSec: 3, owner: 'wf/run' };
  return {
    lv,
    guard,
    guest,
    journaled: () => journaled,
    freeze: (m: Metrics) => freezeGuest(deps(m))({ ...req, deadlineMs: 10_000 }),
    thaw: (m: Metrics) => thawGuest(deps(m))({ ...req, thawedBy: 'workflow' }),
  };
}

const windowOf = async (m: Metrics) => {
  const text = await m.render();
  return { count: sample(text, 'vmsnap_freeze_window_seconds_count'), sum: sample(text, 'vmsnap_freeze_window_seconds_sum') };
};

describe('the freeze window, observed where it ends', () => {
  it('a run’s freeze → thaw: one window, from the freeze call (not the arm before it) to the thaw', async () => {
    const h = host({ armedMsAgo: 5_000 });
    const m = hostMetrics();
    const t0 = Date.now();
    const frozen = await h.freeze(m);
    const thawed = await h.thaw(m);
    const elapsed = (Date.now() - t0) / 1000;
    const w = await windowOf(m);
    expect(w.count).toBe(1);
    expect(w.sum).toBeCloseTo((thawed.thawedAt! - frozen.startedAt) / 1000, 6);
    expect(w.sum).toBeLessThanOrEqual(elapsed);
    // Once per freeze: a second thaw (a retry, the compensation) finds no window to end.
    await h.thaw(m);
    expect((await windowOf(m)).count).toBe(1);
  });

  it('a worker that restarted between freeze and thaw measures from the journal entry’s arming', async () => {
    const h = host({ armedMsAgo: 5_000 });
    await h.freeze(hostMetrics());
    const restarted = hostMetrics();
    await h.thaw(restarted);
    const w = await windowOf(restarted);
    expect(w.count).toBe(1);
    expect(w.sum).toBeGreaterThanOrEqual(5);
  });

  it('the guard fired first: the window ended at its thaw', async () => {
    const firedAt = Date.now() + 250;
    const h = host({ guardFiredAt: firedAt });
    const m = hostMetrics();
    const frozen = await h.freeze(m);
    await h.thaw(m);
    expect((await windowOf(m)).sum).toBeCloseTo((firedAt - frozen.startedAt) / 1000, 6);
  });

  it('a guest that left this host frozen is not observed here: its window ends where it runs', async () => {
    const h = host();
    const m = hostMetrics();
    await h.freeze(m);
    h.guest.gone = true; // migrated, still frozen
    const r = await h.thaw(m);
    expect(r.domainGone).toBe(true);
    expect((await windowOf(m)).count).toBe(0);
  });

  it('reconcile at start (or the sweeper) ends a window its dead predecessor left: observed since the arming', async () => {
    const h = host();
    h.guest.frozen = 2;
    const m = hostMetrics();
    const left = entry({ frozenAt: Date.now() - 7_000 });
    const r = await thawJournaled(h.lv, h.guard, left, 'reconcile', m, quiet);
    expect(r.thawedBy).toBe('reconcile');
    const w = await windowOf(m);
    expect(w.count).toBe(1);
    expect(w.sum).toBeGreaterThanOrEqual(7);
    expect(await m.render()).toContain('vmsnap_thaws_total{layer="reconcile"} 1\n');
  });
});

describe('the journal at each scrape', () => {
  it('counts the guests in a window and ages the oldest; watches are not frozen guests; a bad entry is skipped and left in place', async () => {
    const stateDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-journal-'));
    const journal = new FreezeJournal(stateDir);
    const now = Date.now();
    await journal.write(entry({ domainUuid: '11111111-1111-4111-8111-111111111111', frozenAt: now - 12_500, deadlineAt: now - 2_500 }));
    await journal.write(entry({ domainUuid: '22222222-2222-4222-8222-222222222222', frozenAt: now - 2_000, deadlineAt: now + 28_000 }));
    await journal.write(entry({ domainUuid: '33333333-3333-4333-8333-333333333333', frozenAt: now - 60_000, mode: 'watch' }));
    const bad = path.join(journal.dir, '44444444-4444-4444-8444-444444444444.json');
    writeFileSync(bad, '{"torn');
    const m = hostMetrics();
    m.onScrape(journalGauges(journal, quiet, () => now));
    await m.collect(1_000);
    const text = await m.render();
    expect(sample(text, 'vmsnap_guests_frozen')).toBe(2);
    expect(sample(text, 'vmsnap_oldest_freeze_age_seconds')).toBe(12.5);
    // The oldest window's own deadline (10 s), not the younger one's (30 s): the pair an alert compares.
    expect(sample(text, 'vmsnap_oldest_freeze_deadline_seconds')).toBe(10);
    expect(existsSync(bad)).toBe(true);

    for (const e of await journal.entries()) await journal.remove(e.domainUuid);
    await m.collect(1_000);
    const after = await m.render();
    expect(sample(after, 'vmsnap_guests_frozen')).toBe(0);
    expect(sample(after, 'vmsnap_oldest_freeze_age_seconds')).toBe(0);
    expect(sample(after, 'vmsnap_oldest_freeze_deadline_seconds')).toBe(0);
  });

  it('a journal not made yet is an empty one; one that cannot be read says NaN, not 0', async () => {
    const fresh = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-journal-'));
    const m = new Metrics();
    m.onScrape(journalGauges(new FreezeJournal(fresh), quiet));
    await m.collect(1_000);
    expect(sample(await m.render(), 'vmsnap_guests_frozen')).toBe(0);

    const broken = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-journal-'));
    writeFileSync(path.join(broken, 'frozen'), 'a file where the journal dir should be');
    const n = new Metrics();
    n.onScrape(journalGauges(new FreezeJournal(broken), quiet));
    await n.collect(1_000);
    expect(sample(await n.render(), 'vmsnap_guests_frozen')).toBeNaN();
    // prom-client writes `Nan`; Prometheus parses any case.
    expect(await n.render()).toMatch(/\nvmsnap_oldest_freeze_deadline_seconds nan\n/i);
  });
});
