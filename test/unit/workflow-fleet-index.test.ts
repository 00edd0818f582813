import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import type { LibvirtClient } from '../../src/libvirt';
import { FLEET_REGISTRY_ID, FLEET_TASK_QUEUE, workerIdentity } from '../../src/model/fleet';
import type { HostBeat } from '../../src/model/fleet';
import { HOST_ENTRY_TYPE, entriesInState, hostEntryId } from '../../src/model/fleet-index';
import { SA } from '../../src/model/search-attributes';
import { FleetBeat } from '../../src/worker/fleet-beat';
import { countHosts, forgetLegacyRead, listHosts, placementCandidates, readHost } from '../../src/worker/fleet-index';
import type { Logger } from '../../src/worker/logger';
import { temporalBinary } from '../../support/fast/temporal-binary';
import { quietRuntime } from '../helpers/workflow-lane';

/**
 * The fleet index on a throwaway Temporal dev server: the real entry workflow, the real beat
 * (libvirt faked by a list of domains), the real visibility queries.
 */
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };

beforeAll(async () => {
  quietRuntime();
  env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: temporalBinary() }, searchAttributes: Object.values(SA) },
  });
  worker = await Worker.create({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', taskQueue: FLEET_TASK_QUEUE, workflowBundle: { code: inject('fleetWorkflowBundle') }, shutdownGraceTime: '1s' });
  running = worker.run();
}, 120_000);

afterAll(async () => {
  worker?.shutdown();
  await running?.catch(() => undefined);
  await env?.teardown();
});

type Dom = { name: string; uuid: string; running: boolean };

/** A host: its domains (edit them to migrate one), and its real beat. */
function host(client: Client, name: string, domains: Dom[], intervalMs = 1000, lostAfterMs?: number) {
  let down = false;
  const lv = {
    listDomains: async (o?: { which?: string }) => {
      if (down) throw new Error('libvirtd is gone');
      return domains.filter((d) => o?.which === 'defined' || d.running).map((d) => ({ name: d.name, uuid: d.uuid, id: d.running ? 1 : -1 }));
    },
  } as unknown as LibvirtClient;
  const beat = new FleetBeat(client, { host: name, taskQueue: `vmsnap-${name}`, identity: workerIdentity(name, 1), ...(lostAfterMs ? { lostAfterMs } : {}) }, async () => lv, intervalMs, quiet);
  return { domains, beat, silence: () => (down = true) };
}

const dom = (name: string, running = true): Dom => ({ name, uuid: randomUUID(), running });

async function until<T>(what: string, f: () => Promise<T | undefined | false>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const names = (hs: { host: string }[]) => hs.map((h) => h.host).sort();

describe('the fleet index', () => {
  it('names only the hosts that have a domain — by name, by UUID, shut off, or with quotes in its name — and follows a migration within about a second', async () => {
    const client = env.client;
    const odd = dom(`it's "odd" vm`);
    const off = dom('vm-off', false);
    const vm1 = dom('vm-1');
    // Beats 10 s apart, as by default: the index follows a migration by the beat's look every second.
    const a = host(client, 'ix-a', [vm1, odd], 10_000);
    const b = host(client, 'ix-b', [dom('vm-2'), off], 10_000);
    const others = Array.from({ length: 5 }, (_, i) => host(client, `ix-o${i}`, [dom(`vm-o${i}`)]));
    for (const h of [a, b, ...others]) h.beat.start();
    try {
      await until('every host indexed', async () => (await listHosts(client)).filter((h) => h.host.startsWith('ix-')).length === 7);
      await until('vm-1 indexed on ix-a', async () => names((await placementCandidates(client, 'vm-1')).hosts).join() === 'ix-a');
      expect(names((await placementCandidates(client, vm1.uuid)).hosts)).toEqual(['ix-a']);
      expect(names((await placementCandidates(client, vm1.uuid.toUpperCase())).hosts)).toEqual(['ix-a']);
      expect(names((await placementCandidates(client, odd.name)).hosts)).toEqual(['ix-a']);
      expect(names((await placementCandidates(client, 'vm-off')).hosts)).toEqual(['ix-b']);
      const none = await placementCandidates(client, 'vm-nowhere');
      expect(none.hosts).toEqual([]);
      expect(none.live).toBeGreaterThanOrEqual(7);

      // A live migration: the VM is on b now. The beat looks every second, and beats when its set changed.
      a.domains.splice(a.domains.indexOf(vm1), 1);
      b.domains.push(vm1);
      const t0 = Date.now();
      await until('vm-1 indexed on ix-b only', async () => names((await placementCandidates(client, 'vm-1')).hosts).join() === 'ix-b');
      expect(Date.now() - t0).toBeLessThan(5_000);
    } finally {
      for (const h of [a, b, ...others]) await h.beat.leave(true);
    }
    // Retired: the entries end and leave the index.
    await until('retired hosts gone', async () => !(await listHosts(client)).some((h) => h.host.startsWith('ix-')));
    expect(await readHost(client, 'ix-a')).toBeUndefined();
  }, 60_000);

  it('a host that stops beating is late, then lost, and its silence is what a placement is unsure about; a clean stop drains', async () => {
    const client = env.client;
    const quietHost = host(client, 'ix-late', [dom('vm-l')], 500, 4000);
    const drains = host(client, 'ix-drain', [dom('vm-d')], 500, 60_000);
    quietHost.beat.start();
    drains.beat.start();
    await until('both alive', async () => (await readHost(client, 'ix-late')) && (await readHost(client, 'ix-drain')));
    // Silent without a word (libvirtd gone: every beat fails), and a clean stop.
    quietHost.silence();
    await drains.beat.leave();
    await until('late and draining published', async () => {
      const c = await placementCandidates(client, 'vm-elsewhere');
      return names(c.hosts).join() === 'ix-drain,ix-late';
    });
    const c = await placementCandidates(client, 'vm-elsewhere');
    expect(c.hosts.find((h) => h.host === 'ix-drain')?.drainingSince).toBeDefined();
    await until('ix-late lost', async () => {
      for await (const wf of client.workflow.list({ query: entriesInState(['lost']) })) if (wf.workflowId === hostEntryId('ix-late')) return true;
      return false;
    });
    expect((await countHosts(client)).lost).toBeGreaterThanOrEqual(1);
    // A lost host is not among the ones a placement is unsure about.
    expect(names((await placementCandidates(client, 'vm-elsewhere')).hosts)).toEqual(['ix-drain']);
    await quietHost.beat.leave();
    for (const h of ['ix-late', 'ix-drain']) await client.workflow.getHandle(hostEntryId(h)).terminate('test over');
  }, 60_000);

  it('an entry that continues as new keeps its index, and a quiet beat publishes nothing', async () => {
    const client = env.client;
    const id = hostEntryId('ix-long');
    const beat = (i: number): HostBeat => ({ host: 'ix-long', taskQueue: 'vmsnap-ix-long', identity: workerIdentity('ix-long', 1), sentAt: i, intervalMs: 60_000, domains: [{ name: 'vm-long', uuid: '00000000-0000-4000-8000-000000000001' }] });
    await client.workflow.signalWithStart(HOST_ENTRY_TYPE, { workflowId: id, taskQueue: FLEET_TASK_QUEUE, args: [{}], signal: 'hostBeat', signalArgs: [beat(1)] });
    const first = (await client.workflow.getHandle(id).describe()).runId;
    await until('indexed', async () => names((await placementCandidates(client, 'vm-long')).hosts).join() === 'ix-long');
    const upserts = async () => (await client.workflow.getHandle(id).fetchHistory()).events?.filter((e) => e.upsertWorkflowSearchAttributesEventAttributes).length ?? 0;
    for (let i = 2; i <= 20; i++) await client.workflow.getHandle(id).signal('hostBeat', beat(i));
    await until('beats applied', async () => (await readHost(client, 'ix-long'))?.beats === 20);
    expect(await upserts()).toBe(1);
    // Past the entry's 1000 events (signals arriving together share a workflow task).
    for (let i = 21; i <= 1100; i += 20) await Promise.all(Array.from({ length: 20 }, (_, k) => client.workflow.getHandle(id).signal('hostBeat', beat(i + k))));
    await until('continued as new', async () => (await client.workflow.getHandle(id).describe()).runId !== first);
    await until('beats applied after', async () => (await readHost(client, 'ix-long'))?.sentAt === 1100);
    expect(names((await placementCandidates(client, 'vm-long')).hosts)).toEqual(['ix-long']);
    await client.workflow.getHandle(id).terminate('test over');
  }, 120_000);

  it('during a rolling upgrade, hosts still on the old registry are found there; once every one has an entry, the old registry is ended', async () => {
    const client = env.client;
    const vm = dom('vm-upgrading');
    const oldBeat: HostBeat = { host: 'ix-old', taskQueue: 'vmsnap-ix-old', identity: workerIdentity('ix-old', 7), sentAt: Date.now(), intervalMs: 10_000, domains: [{ name: vm.name, uuid: vm.uuid }] };
    await client.workflow.signalWithStart('fleetRegistry', { workflowId: FLEET_REGISTRY_ID, taskQueue: FLEET_TASK_QUEUE, args: [{}], signal: 'hostBeat', signalArgs: [oldBeat] });
    // The old registry answers once its first workflow task has run.
    await until('found on the old registry', async () => {
      forgetLegacyRead();
      return names((await placementCandidates(client, vm.name).catch(() => ({ hosts: [] }))).hosts).join() === 'ix-old';
    });
    expect(names(await listHosts(client)).includes('ix-old')).toBe(true);
    // Its entry exists but has not published yet (no beat taken): the old registry still answers for it.
    await client.workflow.start(HOST_ENTRY_TYPE, { workflowId: hostEntryId('ix-old'), taskQueue: FLEET_TASK_QUEUE, args: [{}] });
    forgetLegacyRead();
    await listHosts(client);
    expect((await client.workflow.getHandle(FLEET_REGISTRY_ID).describe()).status.name).toBe('RUNNING');
    forgetLegacyRead();
    expect(names((await placementCandidates(client, vm.name)).hosts)).toEqual(['ix-old']);
    // The host is upgraded: its new worker beats into its entry.
    const upgraded = host(client, 'ix-old', [vm]);
    upgraded.beat.start();
    try {
      await until('indexed', async () => names((await placementCandidates(client, vm.name)).hosts).join() === 'ix-old');
      forgetLegacyRead();
      await until('the old registry ended', async () => {
        forgetLegacyRead();
        await listHosts(client);
        return (await client.workflow.getHandle(FLEET_REGISTRY_ID).describe()).status.name === 'TERMINATED';
      });
      expect(names((await placementCandidates(client, vm.name)).hosts)).toEqual(['ix-old']);
    } finally {
      await upgraded.beat.leave(true);
    }
  }, 60_000);
});
