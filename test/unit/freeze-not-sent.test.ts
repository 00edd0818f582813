import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { atFailureEdge } from '../../activities/failures';
import { freezeGuest } from '../../activities/freeze';
import type { ActivityDeps } from '../../activities/deps';
import { LibvirtError } from '../../src/libvirt';
import { Metrics } from '../../src/host/metrics';
import { FailureType, saysFreezeNotSent } from '../../src/model/failures';
import { jsonLogger } from '../../src/worker/logger';

/*
 * Issue 25 #8 at the activity edge: a freeze step that fails before virDomainFSFreeze is sent (its
 * status check, its agent-timeout change, its guard arming) says so in its failure details, and
 * undoes what it did without a thaw; one that fails at the call itself does not (outcome unknown).
 */

const UUID = '0b6f9a57-3c1e-4d7e-9a3b-5f1e2d3c4b5a';
const quiet = jsonLogger({ host: 'unit' }, { write: () => true } as unknown as NodeJS.WritableStream);
const agentDown = () => new LibvirtError({ code: 86, domain: 10, level: 2, message: 'Guest agent is not responding', procedure: 'QEMU_PROC_DOMAIN_AGENT_COMMAND' });

function host(o: { statusFails?: boolean; armFails?: boolean; freezeFails?: boolean }) {
  const calls: string[] = [];
  const lv = {
    async lookupDomainByUuid(uuid: string) {
      return { uuid, name: 'g', id: 1 };
    },
    async fsFreezeStatus() {
      calls.push('status');
      if (o.statusFails) throw agentDown();
      return 'thawed' as const;
    },
    async setAgentResponseTimeout(_d: unknown, sec: number) {
      calls.push(`timeout ${sec}`);
    },
    async fsFreeze() {
      calls.push('fsFreeze');
      if (o.freezeFails) throw agentDown();
      return 2;
    },
    async fsThaw() {
      calls.push('fsThaw');
      return 0;
    },
  };
  const guard = {
    async arm() {
      calls.push('arm');
      if (o.armFails) throw new Error('ENOSPC: no space left on device, write journal');
      return {};
    },
    async release() {
      calls.push('release');
      return {};
    },
    async clear() {
      calls.push('clear');
    },
    async read() {
      return undefined;
    },
  };
  const metrics = new Metrics();
  const deps = {
    host: 'h',
    libvirt: async () => lv,
    libvirtStatusDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-status-')),
    guard,
    metrics,
    log: quiet,
  } as unknown as ActivityDeps;
  const { freezeGuest: freeze } = atFailureEdge({ freezeGuest: freezeGuest(deps) });
  const req = { domainUuid: UUID, domainName: 'g', agentTimeoutSec: 3, owner: 'wf/run', deadlineMs: 10_000 };
  return { calls, metrics, run: () => freeze(req).then(() => undefined, (e: unknown) => e as ApplicationFailure) };
}

describe('a freeze step that fails before the freeze is sent', () => {
  it('its status check: marked FREEZE_NOT_SENT, nothing armed, nothing thawed', async () => {
    const h = host({ statusFails: true });
    const f = await h.run();
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(saysFreezeNotSent(f!.details)).toBe(true);
    expect(f!.message).toContain('prepare freeze of g');
    expect(h.calls).toEqual(['status']);
  });

  it('its guard arming: marked FREEZE_NOT_SENT; the guard stood down and the agent timeout put back, without a thaw', async () => {
    const h = host({ armFails: true });
    const f = await h.run();
    expect(saysFreezeNotSent(f!.details)).toBe(true);
    expect(f!.type).toBe(FailureType.InternalError);
    // libvirt 9's start value (-2, block) goes back: the status dir had no earlier value.
    expect(h.calls).toEqual(['status', 'timeout 3', 'arm', 'release', 'clear', 'timeout -2']);
    expect(h.calls).not.toContain('fsFreeze');
    expect(h.calls).not.toContain('fsThaw');
  });

  it('the freeze call itself failing is not marked: its outcome is unknown, the guard stays armed', async () => {
    const h = host({ freezeFails: true });
    const f = await h.run();
    expect(f!.type).toBe(FailureType.FreezeFailed);
    expect(saysFreezeNotSent(f!.details)).toBe(false);
    expect(h.calls).toEqual(['status', 'timeout 3', 'arm', 'fsFreeze']);
  });
});
