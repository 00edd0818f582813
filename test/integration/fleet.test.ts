import { listHosts } from '../../src/worker/fleet-index';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLEET_TASK_QUEUE } from '../../src/model/fleet';
import type { FleetHost } from '../../src/model/fleet';
import type { SnapshotResult } from '../../src/model/types';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { CephView } from '../helpers/ceph-inspect';
import { limitState } from '../helpers/limit-turns';
import { limitWorkflowId } from '../../src/model/limits';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { failureOf } from '../helpers/failure-of';
import { freezeStatus } from '../helpers/guest';
import { need } from '../../support/lab/env';
import { until } from '../helpers/until';

/*
 * Runs started by VM name, on the fleet queue, against the real lab: the registry learns the host
 * from its heartbeats, the router finds the VM there and runs the whole snapshot as a child on
 * that host's queue. (Two hosts and live migration: test/integration/fleet-migration.test.ts.)
 */
let h: Harness;
let ceph: CephView;
let g1: string;
let g3: string;

beforeAll(async () => {
  // One freeze window at a time on this host: the limits test below needs it; the rest run alone.
  h = await startHarness({ config: { fleetBeatMs: 1000, maxWindowsPerHost: 1 } });
  ceph = new CephView(h.vars);
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
  g3 = need(h.vars, 'VMSNAP_GUEST_3DISK');
  await until(`${h.config.host} in the registry with ${g1}`, async () => (await fleet()).some((x) => x.host === h.config.host && x.domains.some((d) => d.name === g1)), 15_000, 250);
});
afterAll(async () => h?.stop());

async function fleet(): Promise<FleetHost[]> {
  return listHosts(h.client);
}

describe('the fleet index', () => {
  it('knows this host from its heartbeats: queue, identity, running VMs, last seen', async () => {
    const me = (await fleet()).find((x) => x.host === h.config.host)!;
    expect(me.taskQueue).toBe(h.hw.taskQueue);
    expect(me.identity).toMatch(new RegExp(`^vmsnap@${h.config.host}/\\d+$`));
    expect(me.domains.map((d) => d.name)).toContain(g1);
    expect(Date.now() - me.seenAt).toBeLessThan(5000);
  });
});

describe('a run started by VM name on the fleet queue', () => {
  it('Temporal client entry point: located, run on the VM’s host, named after the started id, quiesced', async () => {
    const id = uniqueId('fleet');
    const handle = await h.client.workflow.start('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: g1, quiesce: 'require' }] });
    const result = (await handle.result()) as SnapshotResult;
    try {
      expect(result.workflowId).toBe(id);
      expect(result.host).toBe(h.config.host);
      expect(result.quiesced).toBe(true);
      // One image per disk, named after the id the caller started, owned by it.
      const [pool, image] = result.disks[0].image!.split('/');
      expect((await ceph.meta(pool, image))['vmsnap.workflow-id']).toBe(id);
      expect(await freezeStatus(h.vars, g1)).toBe('thawed');
      // The move to the host is in the history: a child on the host's queue.
      const child = h.client.workflow.getHandle(`${id}.on.${h.config.host}`);
      const desc = await child.describe();
      expect(desc.taskQueue).toBe(h.hw.taskQueue);
      expect(desc.status.name).toBe('COMPLETED');
    } finally {
      await ceph.removeResultImages(result);
    }
  });

  it('the CLI without --host goes through the fleet queue', async () => {
    const env = cliEnv(h.vars);
    const r = await vmsnapCli(['snapshot', g1, '--wait', '--json', '--workflow-id', uniqueId('fleet-cli')], env);
    expect(r.code, r.stderr).toBe(0);
    const result = json<SnapshotResult>(r);
    try {
      expect(result.host).toBe(h.config.host);
      expect(result.quiesced).toBe(true);
    } finally {
      await ceph.removeResultImages(result);
    }
  });

  it('a schedule created without --host starts its runs on the fleet queue', async () => {
    const env = cliEnv(h.vars);
    const id = uniqueId('fleet-sched');
    const r = await vmsnapCli(['schedule', 'create', id, '--domain', g1, '--every', '1h', '--paused', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    try {
      expect(json<{ taskQueue: string }>(r).taskQueue).toBe(FLEET_TASK_QUEUE);
      const desc = await h.client.schedule.getHandle(id).describe();
      expect(desc.action.type === 'startWorkflow' && desc.action.taskQueue).toBe(FLEET_TASK_QUEUE);
    } finally {
      await h.client.schedule.getHandle(id).delete();
    }
  });

  it('a VM no host runs fails DomainNotFound, non-retryable, before anything is created', async () => {
    const before = await ceph.images('images');
    const f = await failureOf(h.client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: uniqueId('fleet-none'), args: [{ domain: 'no-such-vm-anywhere' }] }));
    expect(f.type).toBe('DomainNotFound');
    expect(f.nonRetryable).toBe(true);
    expect(await ceph.images('images')).toEqual(before);
  });

  it('a host whose worker stopped cleanly leaves "nowhere" unsure (DomainNotPlaced, naming it) until `vmsnap fleet forget`', async () => {
    const env = cliEnv(h.vars);
    const other = await startHarness({ config: { fleetBeatMs: 1000 } });
    const name = other.config.host;
    let stopped = false;
    try {
      await until(`${name} in the registry`, async () => (await fleet()).some((x) => x.host === name), 15_000, 250);
      const refused = await vmsnapCli(['fleet', 'forget', name], env);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(new RegExp(`${name} still beats.*stop its worker first`));
      // A restart's stop: "back soon". The VM could be there when it is, so "not found" is a guess.
      await other.stop({ retire: false });
      stopped = true;
      const hosts = await vmsnapCli(['fleet', 'hosts', '--json'], env);
      expect(hosts.code, hosts.stderr).toBe(0);
      expect(json<{ host: string; state: string }[]>(hosts).find((x) => x.host === name)?.state).toBe('draining');
      const unsure = await failureOf(h.client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: uniqueId('fleet-unsure'), args: [{ domain: 'no-such-vm-anywhere' }] }));
      expect(unsure.type).toBe('DomainNotPlaced');
      expect(unsure.nonRetryable).toBe(false);
      expect(unsure.message).toContain(`${name} did not answer (one whose worker is gone for good: vmsnap fleet forget ${name})`);
      const forgot = await vmsnapCli(['fleet', 'forget', name, '--json'], env);
      expect(forgot.code, forgot.stderr).toBe(0);
      expect(json(forgot)).toEqual({ host: name, forgotten: true, was: 'draining' });
      expect((await fleet()).some((x) => x.host === name)).toBe(false);
      const found = await failureOf(h.client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: uniqueId('fleet-none'), args: [{ domain: 'no-such-vm-anywhere' }] }));
      expect(found.type).toBe('DomainNotFound');
      const unknown = await vmsnapCli(['fleet', 'forget', name], env);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain(`knows no host "${name}"`);
    } finally {
      if (!stopped) await other.stop();
    }
  });

  it('routedBy is the router’s alone: a caller who sets it is refused', async () => {
    const f = await failureOf(h.client.workflow.execute('consistentSnapshot', { taskQueue: h.hw.taskQueue, workflowId: uniqueId('forged'), args: [{ domain: g1, routedBy: 'someone-elses-run' }] }));
    expect(f.type).toBe('InvalidInput');
  });
});

describe('fleet limits, held through Temporal', () => {
  it('maxWindowsPerHost=1: two VMs snapshotted at once never freeze at the same time; the second waits outside its window', async () => {
    const runs = await Promise.all(
      [g1, g3].map((domain) =>
        h.client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: uniqueId('fleet-limit'), args: [{ domain, quiesce: 'require' }] }) as Promise<SnapshotResult>,
      ),
    );
    try {
      const windows = runs.map((r) => ({ from: Date.parse(r.frozenAt!), to: Date.parse(r.frozenAt!) + r.freezeWindowMs!, waited: r.stepsMs.slots ?? 0 })).sort((a, b) => a.from - b.from);
      expect(runs.every((r) => r.quiesced)).toBe(true);
      expect(windows[1].from, 'second window starts after the first ends').toBeGreaterThanOrEqual(windows[0].to);
      expect(Math.max(...windows.map((w) => w.waited)), 'one of them waited for the slot').toBeGreaterThan(0);
      // The turns are let go once the windows ended.
      const turns = await limitState(h.client, limitWorkflowId('window', h.config.host));
      expect(turns.held.length + turns.queue.length).toBe(0);
    } finally {
      for (const r of runs) await ceph.removeResultImages(r);
    }
  });
});

describe('vmsnap doctor shows the fleet', () => {
  it('one line per host: alive, its queue, when last seen, its running VMs', async () => {
    const r = await vmsnapCli(['doctor', '--host', h.config.host, '--json'], cliEnv(h.vars), 60_000);
    const checks = json<{ checks: { name: string; status: string; detail: string }[] }>(r).checks;
    const me = checks.find((c) => c.name === `fleet.${h.config.host}`);
    expect(me, JSON.stringify(checks.filter((c) => c.name.startsWith('fleet')))).toBeDefined();
    expect(me!.status).toBe('ok');
    expect(me!.detail).toContain(h.hw.taskQueue);
    expect(me!.detail).toMatch(/last seen \d+ s ago/);
    expect(me!.detail).toContain(g1);
  });
});
