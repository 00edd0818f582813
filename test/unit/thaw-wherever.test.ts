import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Activities } from '../../activities';
import { FLEET_TASK_QUEUE } from '../../src/model/fleet';
import type { ThawRequest, ThawResult } from '../../src/model/types';
import type { ThawWhereverResult } from '../../workflows/thaw-wherever';
import { temporalBinary } from '../../support/fast/temporal-binary';

/*
 * The hand-off workflow on the real workflow code: which activity it schedules on the host the
 * guest runs on now. A host of this release gets thawArrivedGuest; a host still on a release
 * without it (a rolling upgrade) gets the old thawGuest with layer `handoff`, at once.
 * (The SDK logs that host's NotFoundError once, at ERROR: expected.)
 */
let env: TestWorkflowEnvironment;
const workers: Worker[] = [];
let running: Promise<unknown>;
const calls: { host: string; activity: string; req: unknown }[] = [];
const guests = { 'vm-new': 'host-new', 'vm-old': 'host-old' } as Record<string, string>;
const thawed: ThawResult = { thawedFilesystems: 2, startedAt: 1, returnedAt: 2 };

function hostActivities(host: string, withArrived: boolean): Partial<Activities> {
  const thaw = (activity: string) => async (req: unknown) => (calls.push({ host, activity, req }), thawed);
  return {
    domainPresence: async (req: { domain: string; taskQueue: string }) =>
      guests[req.domain] === host ? { host, taskQueue: req.taskQueue, found: true, uuid: req.domain, name: req.domain, state: 'running' } : { host, taskQueue: req.taskQueue, found: false },
    thawGuest: thaw('thawGuest') as Activities['thawGuest'],
    ...(withArrived ? { thawArrivedGuest: thaw('thawArrivedGuest') as Activities['thawArrivedGuest'] } : {}),
  };
}

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: temporalBinary() } } });
  const common = { connection: env.nativeConnection, namespace: env.namespace ?? 'default', shutdownGraceTime: '1s' } as const;
  const fleet = ['host-new', 'host-old'].map((host) => ({ host, taskQueue: `q-${host}`, alive: true, ask: true }));
  workers.push(
    await Worker.create({ ...common, taskQueue: FLEET_TASK_QUEUE, workflowBundle: { code: inject('fleetWorkflowBundle') }, activities: { fleetHosts: async () => fleet, placementCandidates: async () => ({ hosts: fleet, silent: [] }) } }),
    await Worker.create({ ...common, taskQueue: 'q-host-new', activities: hostActivities('host-new', true) }),
    await Worker.create({ ...common, taskQueue: 'q-host-old', activities: hostActivities('host-old', false) }),
  );
  running = Promise.all(workers.map((w) => w.run()));
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  await running;
  await env?.teardown();
});

const handOff = (domain: string) =>
  env.client.workflow.execute('thawWherever', {
    taskQueue: FLEET_TASK_QUEUE,
    workflowId: `handoff-${domain}-${randomUUID()}`,
    args: [{ domainUuid: domain, domainName: domain, agentTimeoutSec: 1, fromHost: 'host-gone', owner: 'run/1' }],
    workflowExecutionTimeout: '1m',
  }) as Promise<ThawWhereverResult>;

describe('thawWherever', () => {
  it('thaws on the guest’s new host with the hand-off’s own activity', async () => {
    const r = await handOff('vm-new');
    expect(r).toMatchObject({ outcome: 'thawed', host: 'host-new' });
    expect(calls.filter((c) => c.host === 'host-new')).toEqual([
      { host: 'host-new', activity: 'thawArrivedGuest', req: { domainUuid: 'vm-new', domainName: 'vm-new', agentTimeoutSec: 1, owner: 'run/1' } },
    ]);
  });

  it('on a host whose release has no thawArrivedGuest, falls back to its thawGuest (layer handoff) without waiting out retries', async () => {
    const t0 = Date.now();
    const r = await handOff('vm-old');
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(r).toMatchObject({ outcome: 'thawed', host: 'host-old' });
    const old = calls.filter((c) => c.host === 'host-old');
    expect(old).toEqual([{ host: 'host-old', activity: 'thawGuest', req: expect.objectContaining({ domainUuid: 'vm-old', thawedBy: 'handoff' }) }]);
    expect((old[0].req as ThawRequest).owner).toBe('run/1');
  });
});
