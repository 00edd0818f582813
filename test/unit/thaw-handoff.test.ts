import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { thawArrivedGuest, thawGuest } from '../../activities/thaw';
import type { ActivityDeps } from '../../activities/deps';
import type { JournalEntry } from '../../src/safety/freeze-journal';
import { Metrics } from '../../src/host/metrics';
import { FailureType } from '../../src/model/failures';
import { bootId, monoMs } from '../../src/host/clock';

const UUID = '6f1b1c2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f';
/** A live window of this host's own run (its deadline a minute away). */
const ownFreeze = { domainUuid: UUID, owner: 'local-run/1', mode: 'window', freezeId: 'f-local', bootId: bootId(), deadlineMono: monoMs() + 60_000 } as JournalEntry;

/** A host the guest arrived on, frozen (`frozen` filesystems), with or without a freeze of its own in the journal. */
function arrivedOn(opts: { journaled?: JournalEntry; frozen?: number; libvirtDown?: boolean } = {}) {
  const guest = { frozen: opts.frozen ?? 2 };
  const warned: string[] = [];
  const libvirtCalls: string[] = [];
  const resolved: (string | undefined)[] = [];
  const dom = { uuid: UUID, name: 'vm', id: 1 };
  const lv = {
    lookupDomainByUuid: async () => (libvirtCalls.push('lookup'), dom),
    fsThaw: async () => {
      libvirtCalls.push('thaw');
      const n = guest.frozen;
      guest.frozen = 0;
      return n;
    },
    fsFreezeStatus: async () => (guest.frozen ? 'frozen' : 'thawed'),
    getDomainState: async () => ({ state: 'running', reason: 0 }),
  };
  const deps = {
    libvirt: async () => {
      if (opts.libvirtDown) throw new Error('no libvirtd');
      return lv;
    },
    guard: {
      read: async () => opts.journaled,
      release: async () => ({}),
      clear: async () => undefined,
      resolve: async (_u: string, f?: string) => void resolved.push(f),
    },
    metrics: new Metrics(),
    log: { warn: (m: string) => warned.push(m), info: () => undefined, error: () => undefined, debug: () => undefined },
  } as unknown as ActivityDeps;
  return { deps, guest, warned, libvirtCalls, resolved };
}

const req = { domainUuid: UUID, domainName: 'vm', agentTimeoutSec: 1, owner: 'moved-run/1' };

describe('the hand-off thaw on the host a guest migrated to (thawArrivedGuest)', () => {
  it('leaves a freeze this host journaled itself alone: that window is its own run’s to end', async () => {
    const h = arrivedOn({ journaled: ownFreeze });
    const r = await thawArrivedGuest(h.deps)(req);
    expect(r).toMatchObject({ thawedFilesystems: 0, skippedForLocalFreeze: true });
    expect(h.warned.join()).toMatch(/own freeze/);
    expect(h.libvirtCalls).toEqual([]);
    expect(h.guest.frozen).toBe(2);
  });

  it('A → B → A: the same freeze back on its freezing host is thawed there, not skipped, and its obligation resolved', async () => {
    const h = arrivedOn({ journaled: ownFreeze });
    const r = await thawArrivedGuest(h.deps)({ ...req, owner: 'local-run/1', freezeId: 'f-local' });
    expect(r).toMatchObject({ thawedFilesystems: 2 });
    expect(r.skippedForLocalFreeze).toBeUndefined();
    expect(h.guest.frozen).toBe(0);
    expect(h.resolved).toContain('f-local');
  });

  it('a stale window of another freeze (past its deadline) does not keep the arrived guest frozen', async () => {
    const h = arrivedOn({ journaled: { ...ownFreeze, deadlineMono: monoMs() - 1 } });
    const r = await thawArrivedGuest(h.deps)({ ...req, freezeId: 'f-moved' });
    expect(r).toMatchObject({ thawedFilesystems: 2 });
    expect(h.resolved).toContain('f-moved');
  });

  it('thaws the arrived guest with the run’s thaw, counted as layer handoff', async () => {
    const h = arrivedOn();
    const r = await thawArrivedGuest(h.deps)(req);
    expect(r).toMatchObject({ thawedFilesystems: 2 });
    expect(r.skippedForLocalFreeze).toBeUndefined();
    expect(h.guest.frozen).toBe(0);
    expect(await h.deps.metrics.render()).toContain('vmsnap_thaws_total{layer="handoff"} 1');
  });

  it('is registered behind the failure edge: a libvirt that is down reaches the workflow typed', async () => {
    const h = arrivedOn({ libvirtDown: true });
    const err = await createActivities(h.deps)
      .thawArrivedGuest(req)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).type).toBe(FailureType.InternalError);
  });
});

describe('the run’s own thaw (thawGuest)', () => {
  it('thaws a guest this host journaled: the hand-off’s check is not its own', async () => {
    const h = arrivedOn({ journaled: ownFreeze });
    const r = await thawGuest(h.deps)({ ...req, thawedBy: 'workflow', owner: 'local-run/1' });
    expect(r).toMatchObject({ thawedFilesystems: 2 });
    expect(h.guest.frozen).toBe(0);
  });

  it('still makes the hand-off’s check for layer handoff: thawWherever runs from before the new activity schedule it so', async () => {
    const h = arrivedOn({ journaled: ownFreeze });
    const r = await thawGuest(h.deps)({ ...req, thawedBy: 'handoff' });
    expect(r).toMatchObject({ thawedFilesystems: 0, skippedForLocalFreeze: true });
    expect(h.guest.frozen).toBe(2);
  });
});
