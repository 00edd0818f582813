import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { honourArrivals } from '../../src/safety/arrivals';
import { FreezeGuard } from '../../src/safety/freeze-guard';
import type { Obligations } from '../../src/safety/freeze-guard';
import { bootId, monoMs } from '../../src/host/clock';
import type { FreezeObligation } from '../../src/model/freeze-obligation';
import { LibvirtError } from '../../src/libvirt/errors';
import type { LibvirtClient } from '../../src/libvirt';

/*
 * The destination side of a travelled freeze, with this host's libvirt scripted and the
 * obligations in memory: what is thawed, what waits, what is left alone.
 */
const UUID = '6f1b1c2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f';

function memoryObligations(initial: FreezeObligation[]): Obligations & { open: Map<string, FreezeObligation> } {
  const open = new Map(initial.map((o) => [o.domainUuid, o]));
  return {
    open,
    write: async (o) => void open.set(o.domainUuid, o),
    read: async (u) => open.get(u),
    all: async () => [...open.values()],
    resolve: async (u, f) => (!f || open.get(u)?.freezeId === f ? open.delete(u) : undefined, true),
  };
}

function host(state: 'running' | 'paused' | 'absent', frozen = 1) {
  const guest = { frozen };
  const noDomain = new LibvirtError({ message: 'Domain not found', code: 42, domain: 10, level: 2, procedure: 'DOMAIN_LOOKUP_BY_UUID' });
  const lv = {
    lookupDomainByUuid: async () => {
      if (state === 'absent') throw noDomain;
      return { uuid: UUID, name: 'vm', id: 1 };
    },
    getDomainState: async () => ({ state, reason: 0 }),
    fsThaw: async () => {
      const n = guest.frozen;
      guest.frozen = 0;
      return n;
    },
    fsFreezeStatus: async () => (guest.frozen ? 'frozen' : 'thawed'),
  } as unknown as LibvirtClient;
  return { lv, guest };
}

const record = (over: Partial<FreezeObligation> = {}): FreezeObligation => ({
  freezeId: 'f1',
  domainUuid: UUID,
  domainName: 'vm',
  owner: 'wf/run',
  host: 'hv-a',
  frozenAt: Date.now() - 40_000,
  deadlineAt: Date.now() - 10_000,
  agentTimeoutSec: 1,
  disks: [],
  ...over,
});

function setup(state: 'running' | 'paused' | 'absent', o: FreezeObligation) {
  const obligations = memoryObligations([o]);
  const guard = new FreezeGuard({ libvirtUri: '', stateDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-arrivals-')), obligations });
  const h = host(state);
  const deps = { libvirt: async () => h.lv, guard, clockSkewMs: 1000, log: () => undefined };
  return { obligations, guard, guest: h.guest, deps };
}

describe('arrivals: open obligations of guests this host runs', () => {
  it('past the deadline: thawed here and the record resolved, whoever froze it', async () => {
    const s = setup('running', record());
    const pass = await honourArrivals(s.deps);
    expect(pass.honoured.map((h) => h.thawedFilesystems)).toEqual([1]);
    expect(s.guest.frozen).toBe(0);
    expect(s.obligations.open.size).toBe(0);
  });

  it('before the deadline (plus skew): left frozen, due at deadline + skew', async () => {
    const deadlineAt = Date.now() + 20_000;
    const s = setup('running', record({ deadlineAt }));
    const pass = await honourArrivals(s.deps);
    expect(pass.honoured).toEqual([]);
    expect(pass.nextDueAt).toBe(deadlineAt + 1000);
    expect(s.guest.frozen).toBe(1);
    expect(s.obligations.open.size).toBe(1);
  });

  it('paused here (an incoming migration) is "still there, wait", never gone: looked at again in a second', async () => {
    const s = setup('paused', record());
    const pass = await honourArrivals(s.deps);
    expect(pass.honoured).toEqual([]);
    expect(pass.nextDueAt).toBeGreaterThan(Date.now());
    expect(s.obligations.open.size).toBe(1);
  });

  it('not here: not this host’s to act on', async () => {
    const s = setup('absent', record());
    expect((await honourArrivals(s.deps)).honoured).toEqual([]);
    expect(s.obligations.open.size).toBe(1);
  });

  it('this host’s own live window of the same freeze is its run’s to end', async () => {
    const s = setup('running', record());
    await s.guard.journal.write({
      domainUuid: UUID, domainName: 'vm', owner: 'wf/run', mode: 'window', frozenAt: Date.now(), deadlineAt: Date.now() + 60_000,
      deadlineMono: monoMs() + 60_000, bootId: bootId(), agentTimeoutSec: 1, guardId: 'g', freezeId: 'f1',
    });
    expect((await honourArrivals(s.deps)).honoured).toEqual([]);
    expect(s.guest.frozen).toBe(1);
  });
});
