import { DefaultLogger } from '@temporalio/worker';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { WorkflowInboundCallsInterceptor, WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import type { ActivityDeps } from '../../activities/deps';
import { bootId, monoMs } from '../../src/host/clock';
import { Metrics } from '../../src/host/metrics';
import { domainOfInput, freezeFields, ownerFields } from '../../src/model/run-log-fields';
import { interceptors as workflowLogInterceptors } from '../../src/model/run-log-interceptor';
import type { JournalEntry } from '../../src/safety/freeze-journal';
import { reconcile, thawJournaled } from '../../src/safety/reconcile';
import { arrivalsVia, honourArrivals } from '../../src/safety/arrivals';
import { Sweeper } from '../../src/safety/sweeper';
import { jsonLogger, sdkLogFunction } from '../../src/worker/logger';
import { activityLogInterceptor } from '../../src/worker/run-log';

/*
 * Every line about a run names it: workflowId, runId, and the domain where one is known — vmsnap's
 * activity lines and the SDK's, the workflows' (through their log interceptor), and the safety
 * net's lines about a journaled freeze (from its owner `<workflowId>/<runId>`).
 */

const UUID = '6f1b1c2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const out = { write: (s: string) => (lines.push(JSON.parse(s) as Record<string, unknown>), true) } as unknown as NodeJS.WritableStream;
  return { lines, log: jsonLogger({ host: 'h1' }, out, { level: 'debug' }) };
}

describe('the fields', () => {
  it('the domain from an input: domainName, else domain (a string), else domain.name; nothing when none', () => {
    expect(domainOfInput({ domainName: 'vm-1', domain: 'x' })).toEqual({ domain: 'vm-1' });
    expect(domainOfInput({ domain: 'vm-2' })).toEqual({ domain: 'vm-2' });
    expect(domainOfInput({ domain: { name: 'vm-3', uuid: UUID } })).toEqual({ domain: 'vm-3' });
    expect(domainOfInput({ snaps: [] })).toEqual({});
    expect(domainOfInput(undefined)).toEqual({});
  });

  it('a freeze owner splits at its last `/`: a workflow id may hold `/`, a run id does not', () => {
    expect(ownerFields('snap-vm-1/3f1e')).toEqual({ workflowId: 'snap-vm-1', runId: '3f1e' });
    expect(ownerFields('sched/vm-1/2026/3f1e')).toEqual({ workflowId: 'sched/vm-1/2026', runId: '3f1e' });
    expect(ownerFields('no-run')).toEqual({});
    expect(freezeFields({ domainName: 'vm-1', owner: 'w/r' })).toEqual({ domain: 'vm-1', workflowId: 'w', runId: 'r' });
  });
});

describe('activity lines', () => {
  it("vmsnap's and the SDK's lines of one activity execution carry its workflowId, runId and domain", async () => {
    const c = capture();
    // A live window of another freeze on this host: the hand-off thaw logs that it skips.
    const local = { domainUuid: UUID, owner: 'local/1', mode: 'window', freezeId: 'f-local', bootId: bootId(), deadlineMono: monoMs() + 60_000 } as JournalEntry;
    const deps = { guard: { read: async () => local }, metrics: new Metrics(), log: c.log } as unknown as ActivityDeps;
    const env = new MockActivityEnvironment(
      { workflowExecution: { workflowId: 'handoff-vm-1', runId: 'run-7' }, activityType: 'thawArrivedGuest' },
      { interceptors: [activityLogInterceptor], logger: new DefaultLogger('DEBUG', sdkLogFunction(c.log)) },
    );
    await env.run(createActivities(deps).thawArrivedGuest, { domainUuid: UUID, domainName: 'vm-1', agentTimeoutSec: 1, owner: 'moved/2' });
    const run = { workflowId: 'handoff-vm-1', runId: 'run-7' };
    const ours = c.lines.find((l) => String(l.msg).startsWith('hand-off thaw skipped'));
    expect(ours).toMatchObject({ ...run, domain: 'vm-1', activityType: 'thawArrivedGuest' });
    expect(c.lines.find((l) => l.msg === 'Activity completed')).toMatchObject({ sdk: true, ...run, domain: 'vm-1' });
    // Written before the input is decoded: the run, not yet the domain.
    const started = c.lines.find((l) => l.msg === 'Activity started');
    expect(started).toMatchObject({ sdk: true, ...run });
    expect(started).not.toHaveProperty('domain');
  });

  it("the SDK's line of a failed activity carries them too", async () => {
    const c = capture();
    const deps = { guard: { read: async () => Promise.reject(new Error('journal unreadable')) }, metrics: new Metrics(), log: c.log } as unknown as ActivityDeps;
    const env = new MockActivityEnvironment(
      { workflowExecution: { workflowId: 'handoff-vm-1', runId: 'run-8' }, activityType: 'thawArrivedGuest' },
      { interceptors: [activityLogInterceptor], logger: new DefaultLogger('DEBUG', sdkLogFunction(c.log)) },
    );
    await expect(env.run(createActivities(deps).thawArrivedGuest, { domainUuid: UUID, domainName: 'vm-1', agentTimeoutSec: 1, owner: 'moved/2' })).rejects.toThrow(/journal unreadable/);
    expect(c.lines.find((l) => l.msg === 'Activity failed')).toMatchObject({ level: 'warn', workflowId: 'handoff-vm-1', runId: 'run-8', domain: 'vm-1' });
  });
});

describe('workflow lines', () => {
  it('the log interceptor adds the domain its run’s input names to the attributes the SDK gives', async () => {
    const { inbound, outbound } = workflowLogInterceptors();
    await (inbound![0] as WorkflowInboundCallsInterceptor).execute!({ args: [{ domain: 'vm-1', quiesce: 'require' }], headers: {} }, async () => undefined);
    const attrs = (outbound![0] as WorkflowOutboundCallsInterceptor).getLogAttributes!({ workflowId: 'snap-1', runId: 'r-1' }, (a) => a);
    expect(attrs).toEqual({ workflowId: 'snap-1', runId: 'r-1', domain: 'vm-1' });
  });
});

describe("the safety net's lines about a journaled freeze", () => {
  it('name the run that froze it and its domain (reconcile, sweeper)', async () => {
    const c = capture();
    const entry = { domainUuid: UUID, domainName: 'vm-1', owner: 'snap-vm-1/run-3', mode: 'window', frozenAt: Date.now() - 1000, bootId: bootId(), deadlineMono: monoMs() - 1, agentTimeoutSec: 1 } as JournalEntry;
    let frozen = 1;
    const lv = {
      lookupDomainByUuid: async () => ({ uuid: UUID, name: 'vm-1', id: 1 }),
      fsThaw: async () => ((frozen = 0), 1),
      fsFreezeStatus: async () => (frozen ? 'frozen' : 'thawed'),
      getDomainState: async () => ({ state: 'running', reason: 0 }),
      setAgentResponseTimeout: async () => {
        throw new Error('agent timeout refused');
      },
    };
    const guard = { release: async () => ({}), clear: async () => undefined };
    await thawJournaled(lv as never, guard as never, entry, 'sweeper', new Metrics(), c.log);
    expect(c.lines.map((l) => l.msg)).toEqual([expect.stringMatching(/could not restore the agent timeout/), 'journaled freeze of vm-1 resolved: thawed by sweeper']);
    for (const l of c.lines) expect(l).toMatchObject({ workflowId: 'snap-vm-1', runId: 'run-3', domain: 'vm-1' });
  });

  it('a freeze reconcile or the sweeper cannot prove thawed, and an obligation honoured on arrival, name the run that froze the guest', async () => {
    const c = capture();
    const entry = { domainUuid: UUID, domainName: 'vm-1', owner: 'snap-vm-1/run-4', mode: 'window' } as JournalEntry;
    const guard = { entries: async () => [entry], obligations: async () => [] };
    await reconcile(async () => Promise.reject(new Error('libvirtd down')), guard as never, new Metrics(), c.log);
    expect(c.lines).toMatchObject([{ level: 'error', msg: 'reconcile could not prove vm-1 thawed; the entry is kept and the sweeper retries', workflowId: 'snap-vm-1', runId: 'run-4', domain: 'vm-1' }]);
    // The sweeper's pass over the same entry (no bootId: from before this boot, so overdue).
    const swept = capture();
    const sweeperGuard = { ...guard, retryUnrecords: async () => 0, takeLateThaws: async () => [] };
    await new Sweeper(async () => Promise.reject(new Error('libvirtd down')), sweeperGuard as never, new Metrics(), swept.log, 60_000).sweep();
    expect(swept.lines).toMatchObject([{ level: 'error', msg: 'sweeper could not prove vm-1 thawed; keeping its journal entry', workflowId: 'snap-vm-1', runId: 'run-4', domain: 'vm-1' }]);

    const arrived = capture();
    const obligation = { freezeId: 'f1', domainUuid: UUID, domainName: 'vm-2', owner: 'snap-vm-2/run-5', host: 'hv-a', frozenAt: Date.now() - 40_000, deadlineAt: Date.now() - 10_000, agentTimeoutSec: 1, disks: [] };
    const lv = {
      lookupDomainByUuid: async () => ({ uuid: UUID, name: 'vm-2', id: 1 }),
      getDomainState: async () => ({ state: 'running', reason: 0 }),
      fsThaw: async () => 1,
      fsFreezeStatus: async () => 'thawed',
    };
    const arrivals = { read: async () => undefined, obligations: async () => [obligation], resolve: async () => undefined };
    await honourArrivals(arrivalsVia(async () => lv as never, arrivals as never, new Metrics(), arrived.log, 1000));
    expect(arrived.lines).toMatchObject([{ layer: 'arrival', workflowId: 'snap-vm-2', runId: 'run-5', domain: 'vm-2' }]);
  });
});
