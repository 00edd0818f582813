import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { atFailureEdge } from '../../activities/failures';
import { freezeGuest } from '../../activities/freeze';
import type { ActivityDeps } from '../../activities/deps';
import { Metrics } from '../../src/host/metrics';
import { FailureType } from '../../src/model/failures';
import type { FreezeObligation } from '../../src/model/freeze-obligation';
import { jsonLogger } from '../../src/worker/logger';

/*
 * A guest that arrived frozen by vmsnap on another host, met by this host's next freeze: past the
 * freeze's deadline it is vmsnap's to thaw (the run goes on, not GuestFrozenByOther); before it,
 * that run's window may still be open (DomainBusy, retryable); without a record it is somebody
 * else's (GuestFrozenByOther, untouched).
 */
const UUID = '0b6f9a57-3c1e-4d7e-9a3b-5f1e2d3c4b5a';
const quiet = jsonLogger({ host: 'unit' }, { write: () => true } as unknown as NodeJS.WritableStream);

function arrivedFrozen(record?: Partial<FreezeObligation>) {
  const calls: string[] = [];
  let frozen = true;
  const lv = {
    lookupDomainByUuid: async (uuid: string) => ({ uuid, name: 'g', id: 1 }),
    fsFreezeStatus: async () => (calls.push('status'), frozen ? ('frozen' as const) : ('thawed' as const)),
    setAgentResponseTimeout: async () => undefined,
    getDomainState: async () => ({ state: 'running', reason: 1 }),
    fsFreeze: async () => (calls.push('fsFreeze'), (frozen = true), 1),
    fsThaw: async () => (calls.push('fsThaw'), (frozen = false), 1),
  };
  const open: FreezeObligation | undefined = record && {
    freezeId: 'f-other',
    domainUuid: UUID,
    domainName: 'g',
    owner: 'other-run/1',
    host: 'hv-a',
    frozenAt: Date.now() - 60_000,
    deadlineAt: Date.now() - 30_000,
    agentTimeoutSec: 1,
    disks: [],
    ...record,
  };
  const guard = {
    arm: async () => (calls.push('arm'), { freezeId: 'f-new' }),
    release: async () => ({}),
    clear: async () => undefined,
    read: async () => undefined,
    obligationOf: async () => open,
    obligations: async () => (open ? [open] : []),
    resolve: async (_u: string, f?: string) => void calls.push(`resolve ${f}`),
  };
  const deps = {
    host: 'hv-b',
    libvirt: async () => lv,
    libvirtStatusDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-status-')),
    guard,
    clockSkewMs: 1000,
    metrics: new Metrics(),
    log: quiet,
  } as unknown as ActivityDeps;
  const { freezeGuest: freeze } = atFailureEdge({ freezeGuest: freezeGuest(deps) });
  const req = { domainUuid: UUID, domainName: 'g', agentTimeoutSec: 1, owner: 'wf/run', deadlineMs: 10_000 };
  return { calls, run: () => freeze(req).then((r) => r, (e: unknown) => e as ApplicationFailure) };
}

describe('a guest frozen by vmsnap on another host meets this host’s freeze', () => {
  it('past that freeze’s deadline: thawed, its obligation resolved, then frozen afresh', async () => {
    const h = arrivedFrozen({});
    const r = await h.run();
    expect(r).toMatchObject({ frozenFilesystems: 1, freezeId: 'f-new' });
    expect(h.calls.indexOf('fsThaw')).toBeLessThan(h.calls.indexOf('fsFreeze'));
    expect(h.calls).toContain('resolve f-other');
  });

  it('before it: DomainBusy, retryable, nothing thawed or frozen', async () => {
    const h = arrivedFrozen({ deadlineAt: Date.now() + 20_000 });
    const f = (await h.run()) as ApplicationFailure;
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f.type).toBe(FailureType.DomainBusy);
    expect(f.nonRetryable).toBe(false);
    expect(h.calls).not.toContain('fsThaw');
    expect(h.calls).not.toContain('fsFreeze');
  });

  it('with no record anywhere: somebody else’s freeze, left untouched', async () => {
    const h = arrivedFrozen();
    const f = (await h.run()) as ApplicationFailure;
    expect(f.type).toBe(FailureType.GuestFrozenByOther);
    expect(h.calls).not.toContain('fsThaw');
    expect(h.calls).not.toContain('arm');
  });
});
