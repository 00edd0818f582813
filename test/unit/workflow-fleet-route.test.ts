import { ApplicationFailure } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Activities } from '../../activities';
import { FailureType, FREEZE_NOT_SENT } from '../../src/model/failures';
import { FLEET_TASK_QUEUE, MAX_RELOCATIONS } from '../../src/model/fleet';
import type { Presence } from '../../src/model/fleet';
import { bulkTaskQueue } from '../../src/model/naming';
import { SA } from '../../src/model/search-attributes';
import type { SnapshotResult } from '../../src/model/types';
import { FakeHost, scriptedActivities } from '../../support/fast/fake-host';
import { temporalBinary } from '../../support/fast/temporal-binary';
import { failureOf } from '../helpers/failure-of';
import { quietRuntime } from '../helpers/workflow-lane';

/*
 * The fleet router (workflows/fleet.ts's consistentSnapshot, workflows/fleet-route.ts) on the
 * fleet queue's own bundle, with two scripted hosts: its host queues run the host bundle with the
 * fast lane's fake host; the fleet's index and watch are scripted. Each case is a branch a
 * `vmsnap snapshot vm-42` (no --host) takes: placed and run, relocated after its VM moved before
 * the freeze, giving up on a VM that keeps moving, and a host that is lost under its run.
 */
const HOSTS = ['hv-a', 'hv-b'] as const;
type Host = (typeof HOSTS)[number];
const queueOf = (h: Host) => `route-${h}`;

let env: TestWorkflowEnvironment;
const workers: Worker[] = [];
let running: Promise<unknown>;
/** Where each domain runs now, as its hosts' libvirtds would answer. */
const where = new Map<string, Host>();
/** Each case's fake host per host it lands on, by router id: a child `<id>.on.<host>[.<hop>]` calls its own. */
const fakes = new Map<string, Partial<Record<Host, FakeHost>>>();
const lost = new Set<Host>();
/** A domain its new host does not report until this moment (ms): an index and a libvirt that lag a move. */
const hiddenUntil = new Map<string, number>();
const terminated: string[] = [];

function hostOf(workflowId: string): FakeHost {
  const [routerId, rest] = workflowId.split('.on.') as [string, string | undefined];
  const host = rest?.split('.')[0] as Host | undefined;
  const f = host && fakes.get(routerId)?.[host];
  if (!f) throw new Error(`no fake host for ${workflowId}`);
  return f;
}

const judged = (h: Host) => ({
  host: h,
  taskQueue: queueOf(h),
  identity: `vmsnap@${h}/1`,
  sentAt: 0,
  seenAt: 0,
  beats: 1,
  intervalMs: 3000,
  lostAfterMs: 12_000,
  domains: [],
  alive: !lost.has(h),
  ask: !lost.has(h),
  lost: lost.has(h),
});

function presence(h: Host): Pick<Activities, 'domainPresence'> {
  return {
    domainPresence: async (req: { domain: string; taskQueue: string }): Promise<Presence> =>
      where.get(req.domain) === h && Date.now() >= (hiddenUntil.get(req.domain) ?? 0)
        ? { host: h, taskQueue: req.taskQueue, found: true, uuid: `uuid-${req.domain}`, name: req.domain, state: 'running' }
        : { host: h, taskQueue: req.taskQueue, found: false },
  } as Pick<Activities, 'domainPresence'>;
}

/** A guest that leaves for the other host as its freeze is asked for, `times` times: nothing frozen here. */
function movesAtFreeze(f: FakeHost, from: Host): FakeHost {
  return f.script('freezeGuest', async () => {
    where.set(f.domain.name, from === 'hv-a' ? 'hv-b' : 'hv-a');
    throw ApplicationFailure.create({ message: `${f.domain.name} is not on ${from}`, type: FailureType.DomainNotFound, nonRetryable: true, details: [FREEZE_NOT_SENT] });
  });
}

function start(routerId: string, domain: string) {
  return env.client.workflow.start('consistentSnapshot', {
    taskQueue: FLEET_TASK_QUEUE,
    workflowId: routerId,
    args: [{ domain, target: { clone: false } }],
    workflowExecutionTimeout: '3m',
  });
}

beforeAll(async () => {
  quietRuntime();
  env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: temporalBinary() }, searchAttributes: Object.values(SA) },
  });
  const common = { connection: env.nativeConnection, namespace: env.namespace ?? 'default', shutdownGraceTime: '1s' } as const;
  const fleetActs: Partial<Activities> = {
    // The index names both hosts for every domain: the hosts' own answers decide.
    placementCandidates: (async () => ({ hosts: HOSTS.map(judged), silent: [], live: HOSTS.length })) as unknown as Activities['placementCandidates'],
    fleetHost: (async (req: { host: Host }) => judged(req.host)) as unknown as Activities['fleetHost'],
    terminateLostRun: async (req) => {
      terminated.push(req.workflowId);
      await env.client.workflow.getHandle(req.workflowId).terminate(req.reason);
    },
    freezeObligationOf: async () => null,
  };
  workers.push(await Worker.create({ ...common, taskQueue: FLEET_TASK_QUEUE, workflowBundle: { code: inject('fleetWorkflowBundle') }, activities: fleetActs }));
  for (const h of HOSTS) {
    workers.push(
      await Worker.create({ ...common, taskQueue: queueOf(h), workflowBundle: { code: inject('workflowBundle') }, activities: { ...scriptedActivities(hostOf), ...presence(h) } }),
      await Worker.create({ ...common, taskQueue: bulkTaskQueue(queueOf(h)), activities: scriptedActivities(hostOf) }),
    );
  }
  running = Promise.all(workers.map((w) => w.run()));
}, 60_000);

afterAll(async () => {
  for (const f of fakes.values()) for (const h of Object.values(f)) h.releaseHung();
  for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  await running;
  await env?.teardown();
});

describe('the fleet router', () => {
  it('finds the VM and runs the whole run as a child on its host, under the name id it was started with', async () => {
    const a = new FakeHost('vm-placed');
    fakes.set('route-placed', { 'hv-b': a });
    where.set('vm-placed', 'hv-b');
    const result = (await (await start('route-placed', 'vm-placed')).result()) as SnapshotResult;
    expect(result.workflowId).toBe('route-placed');
    expect(result.quiesced).toBe(true);
    expect(result.relocations).toBeUndefined();
    expect((await env.client.workflow.getHandle('route-placed.on.hv-b').describe()).status.name).toBe('COMPLETED');
    expect(a.leftovers().filter((l) => l.startsWith('guest'))).toEqual([]);
  });

  it('follows a VM that moved before its freeze: one relocation, the run completes on the new host', async () => {
    const a = new FakeHost('vm-moved');
    const b = new FakeHost('vm-moved');
    fakes.set('route-moved', { 'hv-a': movesAtFreeze(a, 'hv-a'), 'hv-b': b });
    where.set('vm-moved', 'hv-a');
    const result = (await (await start('route-moved', 'vm-moved')).result()) as SnapshotResult;
    expect(result.relocations?.map((r) => r.from)).toEqual(['hv-a']);
    expect(result.quiesced).toBe(true);
    expect((await env.client.workflow.getHandle('route-moved.on.hv-b.1').describe()).status.name).toBe('COMPLETED');
    // Nothing was frozen on the host it left, and nothing of the run stayed there.
    expect(a.leftovers()).toEqual([]);
  });

  it('keeps looking while the moved VM is not yet found anywhere, and follows it once it is', async () => {
    const a = new FakeHost('vm-lagging');
    const b = new FakeHost('vm-lagging');
    fakes.set('route-lagging', {
      'hv-a': a.script('freezeGuest', async () => {
        // Found nowhere for 8 s after it left: longer than the router's first looks (2 s + 2 s).
        hiddenUntil.set('vm-lagging', Date.now() + 8000);
        where.set('vm-lagging', 'hv-b');
        throw ApplicationFailure.create({ message: 'vm-lagging is not on hv-a', type: FailureType.DomainNotFound, nonRetryable: true, details: [FREEZE_NOT_SENT] });
      }),
      'hv-b': b,
    });
    where.set('vm-lagging', 'hv-a');
    const result = (await (await start('route-lagging', 'vm-lagging')).result()) as SnapshotResult;
    expect(result.relocations?.map((r) => r.from)).toEqual(['hv-a']);
    expect(result.quiesced).toBe(true);
  }, 60_000);

  it('gives up, retryable, on a VM that keeps moving (DomainKeepsMoving)', async () => {
    const a = new FakeHost('vm-restless');
    const b = new FakeHost('vm-restless');
    fakes.set('route-restless', { 'hv-a': movesAtFreeze(a, 'hv-a'), 'hv-b': movesAtFreeze(b, 'hv-b') });
    where.set('vm-restless', 'hv-a');
    const err = await failureOf((await start('route-restless', 'vm-restless')).result());
    expect(err.type).toBe(FailureType.DomainKeepsMoving);
    expect(err.nonRetryable).toBe(false);
    // One child per hop: the first placement and MAX_RELOCATIONS more.
    const children = [];
    for await (const w of env.client.workflow.list({ query: `WorkflowId STARTS_WITH "route-restless.on."` })) children.push(w.workflowId);
    expect(children).toHaveLength(MAX_RELOCATIONS + 1);
  });

  // A minute of real time (the watch's first look), kept in the fast lane: the router's branches
  // are all proven here (issue 29), the lab's two hosts prove it again in fleet-migration.test.ts.
  it('ends a run whose host is lost under it: its child terminated, the run HostLost (retryable)', async () => {
    const a = new FakeHost('vm-stranded').hang('finalizeDisk');
    fakes.set('route-stranded', { 'hv-a': a });
    where.set('vm-stranded', 'hv-a');
    const handle = await start('route-stranded', 'vm-stranded');
    await a.reached('finalizeDisk');
    lost.add('hv-a');
    try {
      // The watch's first look is a minute in (hostWatchMs of an unknown host), then every 3 s.
      const err = await failureOf(handle.result());
      expect(err.type).toBe(FailureType.HostLost);
      expect(err.nonRetryable).toBe(false);
      expect(terminated).toEqual(['route-stranded.on.hv-a']);
      expect((await env.client.workflow.getHandle('route-stranded.on.hv-a').describe()).status.name).toBe('TERMINATED');
    } finally {
      lost.delete('hv-a');
    }
  }, 120_000);
});
