import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Activities } from '../../activities';
import { FLEET_TASK_QUEUE } from '../../src/model/fleet';
import { temporalBinary } from '../../support/fast/temporal-binary';

/*
 * The fleet-wide "in use" a reaper asks before it removes a disk it made (issue 25 #5), on the
 * real workflow code: every other host that is not lost is asked; one that is draining or fails to
 * answer is named as unanswered (its domains are unknown), a lost one is ruled out, and the asking
 * host is not asked about itself. Scripted fleet: each host's defined disks.
 */
let env: TestWorkflowEnvironment;
const workers: Worker[] = [];
let running: Promise<unknown>;
const asked: string[] = [];

const fleet = [
  { host: 'hv-a', taskQueue: 'q-hv-a', alive: true, ask: true, lost: false },
  { host: 'hv-b', taskQueue: 'q-hv-b', alive: true, ask: true, lost: false },
  { host: 'hv-c', taskQueue: 'q-hv-c', alive: true, ask: true, lost: false },
  { host: 'hv-d', taskQueue: 'q-hv-d', alive: false, ask: false, lost: false },
  { host: 'hv-e', taskQueue: 'q-hv-e', alive: false, ask: false, lost: true },
];

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: temporalBinary() } } });
  const common = { connection: env.nativeConnection, namespace: env.namespace ?? 'default', shutdownGraceTime: '1s' } as const;
  const defined: Record<string, Record<string, string>> = { 'hv-a': { 'vms/kept': 'vm-here' }, 'hv-b': { 'vms/kept': 'vm-moved' }, 'hv-c': {} };
  const hostWorker = async (host: string) =>
    Worker.create({
      ...common,
      taskQueue: `q-${host}`,
      activities: {
        rbdDisksDefinedHere: async (req) => {
          asked.push(host);
          // hv-c's libvirtd is down: its failure is as unsure as a draining host's silence.
          if (host === 'hv-c') throw new Error('libvirtd unreachable');
          return req.disks.flatMap((disk) => (defined[host]![disk] ? [{ disk, domain: defined[host]![disk]! }] : []));
        },
      } satisfies Partial<Activities>,
    });
  workers.push(
    await Worker.create({ ...common, taskQueue: FLEET_TASK_QUEUE, workflowBundle: { code: inject('fleetWorkflowBundle') }, activities: { fleetHosts: (async () => fleet) as unknown as Activities['fleetHosts'] } }),
    ...(await Promise.all(['hv-a', 'hv-b', 'hv-c'].map(hostWorker))),
  );
  running = Promise.all(workers.map((w) => w.run()));
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  await running;
  await env?.teardown();
});

const inUse = (disks: string[]) =>
  env.client.workflow.execute('fleetDisksInUse', { taskQueue: FLEET_TASK_QUEUE, workflowId: `disks-${Date.now()}`, args: [{ disks, askingHost: 'hv-a' }] });

describe('fleetDisksInUse', () => {
  it('names the other hosts that use a disk, and every host not lost that could not say', async () => {
    const r = await inUse(['vms/kept', 'vms/free']);
    expect(r.used).toEqual([{ disk: 'vms/kept', domain: 'vm-moved', host: 'hv-b' }]);
    expect(r.unanswered.sort()).toEqual(['hv-c', 'hv-d']);
    // The asking host knows its own domains; a lost one is not waited for.
    expect(asked).not.toContain('hv-a');
    expect(asked).toContain('hv-c');
  }, 30_000);

  it('with every host not lost answering, a disk nobody else uses is free', async () => {
    fleet.splice(2, 2);
    expect(await inUse(['vms/free'])).toEqual({ used: [], unanswered: [] });
  }, 30_000);
});
