import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Activities } from '../../activities';
import { FLEET_TASK_QUEUE } from '../../src/model/fleet';
import type { ThawResult } from '../../src/model/types';
import type { HandOffResult } from '../../workflows/hand-off';
import { temporalBinary } from '../../support/fast/temporal-binary';

/*
 * The freeze's hand-off on the real workflow code: it keeps looking while the guest is found
 * nowhere or paused (never "gone"), stops when somebody else resolved the obligation, and says
 * "nowhere" only with proof (no QEMU has a disk open). Scripted fleet: each domain's answers per look.
 */
let env: TestWorkflowEnvironment;
const workers: Worker[] = [];
let running: Promise<unknown>;
const looks: Record<string, number> = {};
const thawCalls: string[] = [];
const thawed: ThawResult = { thawedFilesystems: 2, startedAt: 1, returnedAt: 2 };

/** Per domain: where it is at look n (0-based), and whether its obligation is still open then. */
const script: Record<string, (n: number) => { state?: 'running' | 'paused'; open: boolean; watchers?: boolean }> = {
  'vm-late': (n) => ({ state: n >= 2 ? 'running' : undefined, open: true }),
  'vm-paused': (n) => ({ state: n >= 2 ? 'running' : 'paused', open: true }),
  'vm-resolved': (n) => ({ open: n < 1 }),
  'vm-nowhere': () => ({ open: true, watchers: false }),
  'vm-still-open': () => ({ open: true, watchers: true }),
};

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: temporalBinary() } } });
  const common = { connection: env.nativeConnection, namespace: env.namespace ?? 'default', shutdownGraceTime: '1s' } as const;
  const fleet = [{ host: 'hv-b', taskQueue: 'q-hv-b', alive: true, ask: true, lost: false }];
  const fleetActs: Partial<Activities> = {
    fleetHosts: (async () => fleet) as unknown as Activities['fleetHosts'],
    // The index names hv-b (the one host), whatever the domain.
    placementCandidates: (async () => ({ hosts: fleet, silent: [] })) as unknown as Activities['placementCandidates'],
    freezeObligationOpen: async (req) => {
      const n = looks[req.domainUuid] ?? 0;
      looks[req.domainUuid] = n + 1;
      return script[req.domainUuid]!(n).open;
    },
    obligationRunningNowhere: async (req) => script[req.domainUuid]!(0).watchers === false,
  };
  const hostActs: Partial<Activities> = {
    domainPresence: async (req) => {
      const st = script[req.domain]!(Math.max(0, (looks[req.domain] ?? 1) - 1)).state;
      return st ? { host: 'hv-b', taskQueue: req.taskQueue, found: true, uuid: req.domain, name: req.domain, state: st } : { host: 'hv-b', taskQueue: req.taskQueue, found: false };
    },
    thawArrivedGuest: async (req) => (thawCalls.push(req.domainUuid), thawed),
  };
  workers.push(
    await Worker.create({ ...common, taskQueue: FLEET_TASK_QUEUE, workflowBundle: { code: inject('fleetWorkflowBundle') }, activities: fleetActs }),
    await Worker.create({ ...common, taskQueue: 'q-hv-b', activities: hostActs }),
  );
  running = Promise.all(workers.map((w) => w.run()));
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  await running;
  await env?.teardown();
});

const handOff = (domain: string) =>
  env.client.workflow.execute('handOffFreeze', {
    taskQueue: FLEET_TASK_QUEUE,
    workflowId: `handoff-${domain}-${Date.now()}`,
    args: [{ domainUuid: domain, domainName: domain, agentTimeoutSec: 1, fromHost: 'hv-a', owner: 'wf/run', freezeId: 'f1', disks: [{ pool: 'vms', image: `${domain}-vda` }] }],
  }) as Promise<HandOffResult>;

describe('the freeze hand-off (handOffFreeze)', () => {
  it('found on no host is "keep looking", never "thawed": it thaws the guest when it shows up', async () => {
    const r = await handOff('vm-late');
    expect(r).toMatchObject({ outcome: 'thawed', host: 'hv-b' });
    expect(looks['vm-late']).toBeGreaterThanOrEqual(3);
    expect(thawCalls).toContain('vm-late');
  }, 30_000);

  it('paused is "still there, wait": thawed once it runs', async () => {
    const r = await handOff('vm-paused');
    expect(r).toMatchObject({ outcome: 'thawed', host: 'hv-b' });
    expect(thawCalls.filter((d) => d === 'vm-paused')).toHaveLength(1);
  }, 30_000);

  it('an obligation resolved by someone else (the destination’s arrival guard) ends it without a thaw of its own', async () => {
    expect(await handOff('vm-resolved')).toEqual({ outcome: 'resolved' });
    expect(thawCalls).not.toContain('vm-resolved');
  }, 30_000);

  it('"nowhere" only with proof: no QEMU has any of its disks open', async () => {
    expect(await handOff('vm-nowhere')).toMatchObject({ outcome: 'nowhere' });
    const h = await env.client.workflow.start('handOffFreeze', {
      taskQueue: FLEET_TASK_QUEUE,
      workflowId: `handoff-still-open-${Date.now()}`,
      args: [{ domainUuid: 'vm-still-open', domainName: 'vm-still-open', agentTimeoutSec: 1, fromHost: 'hv-a', freezeId: 'f1', disks: [{ pool: 'vms', image: 'x' }] }],
    });
    await new Promise((r) => setTimeout(r, 6000));
    // A disk still open somewhere: the guest may run on a host vmsnap does not know. Still looking.
    expect((await h.describe()).status.name).toBe('RUNNING');
    expect(looks['vm-still-open']).toBeGreaterThanOrEqual(3);
    await h.terminate('test done');
  }, 30_000);
});
