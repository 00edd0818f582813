/**
 * The fleet at scale, simulated against the real Temporal dev server (issue 28): N simulated
 * hosts, M VMs each, beating every --beat-ms; each answers the presence activity from its list
 * (no libvirt). The real workflows route snapshot-only runs by VM name on the fleet queue; the
 * runs' VM lives on sim-0, whose worker runs the child with the fast lane's fake host activities
 * (test/../../support/fast/fake-host.ts). Each N is measured twice in the same run: with today's fleet code
 * (the index) and with the code before it (`--base`, default the commit before the index: one
 * registry workflow, every host asked), each on a fresh dev server.
 *
 *   npx tsx bench/fleet-scale.ts [--hosts 10,50,100] [--vms 20] [--runs 5] [--beat-ms 10000] [--base <commit>]
 *                                [--storm 10 --storm-vms 10 --storm-move 5]
 *
 * `--storm H`: a storm instead — every VM of H hosts (each host a full worker) snapshotted at
 * once by name, with 2 freeze windows per host and 8 snapshots per cluster, every --storm-move'th
 * VM live-migrating to the next host as its first freeze is asked for (the child fails
 * DomainMoved, the router follows it once the beats say where it went); prints failures by
 * type, the most frozen at once per host and on the cluster against those limits, runs/min, and
 * history events per run in the router, its child, and the limits' own workflows (the index's
 * FIFO queues against the base's polled slots).
 *
 * Machine-independent figures per run (what a Temporal Cloud bill counts): history events of the
 * router and of its child, activities the router schedules, actions (starts, activities, timers,
 * child starts, signals, upserts; queries counted apart); the fleet's hot spot (events/s into the
 * busiest fleet workflow), the bytes a router's host watch adds to its history per tick, and
 * locate latency (router start → child start; wall time, this machine's).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType, FREEZE_NOT_SENT } from '../src/model/failures';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Runtime, DefaultLogger, Worker, bundleWorkflowCode } from '@temporalio/worker';
import type { NativeConnection } from '@temporalio/worker';
import type { temporal } from '@temporalio/proto';
import type { Activities } from '../activities';
import { fleetHost, fleetHosts, placementCandidates } from '../activities/fleet';
import type { ActivityDeps } from '../activities/deps';
import type { LibvirtClient } from '../src/libvirt';
import { FLEET_REGISTRY_ID, FLEET_TASK_QUEUE, isAlive, isLost, isWorthAsking, workerIdentity } from '../src/model/fleet';
import type { FleetHost, HostBeat, Presence } from '../src/model/fleet';
import { ALL_ENTRIES, hostEntryId } from '../src/model/fleet-index';
import { bulkTaskQueue } from '../src/model/naming';
import { SA } from '../src/model/search-attributes';
import { FleetBeat } from '../src/worker/fleet-beat';
import { listHosts, placementCandidates as candidatesOf, readHost } from '../src/worker/fleet-index';
import type { Logger } from '../src/worker/logger';
import { fleetWorkflowsPath, workflowsPath } from '../src/worker/workflows-path';
import { FakeHost, scriptedActivities } from '../support/fast/fake-host';
import { temporalBinary } from '../support/fast/temporal-binary';
import { quantile } from './stats';

const args = process.argv.slice(2);
const opt = (name: string, d: string) => (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1]! : d);
const HOSTS = opt('hosts', '10,50,100').split(',').map(Number);
const VMS = Number(opt('vms', '20'));
const RUNS = Number(opt('runs', '5'));
const BEAT_MS = Number(opt('beat-ms', '10000'));
const BASE = opt('base', '9faaac5');
const MODES = opt('modes', 'base,index').split(',') as Mode[];
const STORM = Number(opt('storm', '0'));
const STORM_VMS = Number(opt('storm-vms', '10'));
const STORM_MOVE = Number(opt('storm-move', '5'));
const STORM_LIMITS = { windowsPerHost: 2, snapshotsPerCluster: 8 };
const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };

type Mode = 'index' | 'base';
interface Row {
  mode: Mode;
  hosts: number;
  routerEvents: number;
  childEvents: number;
  routerActivities: number;
  actions: number;
  hotEventsPerSec: number;
  hotWorkflow: string;
  watchBytesPerTick: number;
  locateP50: number;
  locateP99: number;
  /** How long the router's workflow tasks waited for a worker (scheduled → started), p50: the fleet queue's backlog. */
  taskWaitP50: number;
  runMsP50: number;
}

const vmName = (h: number, v: number) => `sim-${h}-vm-${v}`;
const uuidOf = (h: number, v: number) => `00000000-0000-4000-8000-${(h * 10_000 + v).toString(16).padStart(12, '0')}`;

/** A host queue's bundle and the fleet queue's: today's are two (workflows/fleet.ts holds the routers), base's one. */
interface Bundles {
  host: string;
  fleet: string;
}

async function bundleOf(mode: Mode): Promise<Bundles> {
  const bundle = async (workflowsPath: string) => (await bundleWorkflowCode({ workflowsPath, logger: silentBundler })).code;
  if (mode === 'index') return { host: await bundle(workflowsPath()), fleet: await bundle(fleetWorkflowsPath()) };
  const dir = path.join(os.tmpdir(), `vmsnap-fleet-base-${BASE}`);
  if (!existsSync(dir)) {
    execFileSync('git', ['worktree', 'add', '--detach', dir, BASE], { stdio: 'ignore' });
    symlinkSync(path.resolve('node_modules'), path.join(dir, 'node_modules'));
  }
  const one = await bundle(path.join(dir, 'workflows', 'index.ts'));
  return { host: one, fleet: one };
}
const noop = () => undefined;
const silentBundler = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop };

/** A simulated host's presence answer: its own list, as libvirt would say. */
function presence(h: number): Pick<Activities, 'domainPresence'> {
  return {
    domainPresence: async (req: { domain: string; taskQueue: string }): Promise<Presence> => {
      const base = { host: `sim-${h}`, taskQueue: req.taskQueue };
      for (let v = 0; v < VMS; v++) if (req.domain === vmName(h, v) || req.domain === uuidOf(h, v)) return { ...base, found: true, uuid: uuidOf(h, v), name: vmName(h, v), state: 'running' };
      return { ...base, found: false };
    },
  } as Pick<Activities, 'domainPresence'>;
}

function fakeLibvirt(h: number): LibvirtClient {
  const doms = Array.from({ length: VMS }, (_, v) => ({ name: vmName(h, v), uuid: uuidOf(h, v), id: v + 1 }));
  return { listDomains: async () => doms } as unknown as LibvirtClient;
}

/** The base release's beat: the whole list into the one registry workflow. */
function baseBeat(client: Client, h: number, domainsNow?: () => HostBeat['domains']): { stop(): void } {
  const fixed = Array.from({ length: VMS }, (_, v) => ({ name: vmName(h, v), uuid: uuidOf(h, v) }));
  const send = () => {
    const domains = domainsNow ? domainsNow() : fixed;
    const beat: HostBeat = { host: `sim-${h}`, taskQueue: `sim-${h}`, identity: workerIdentity(`sim-${h}`, 1), sentAt: Date.now(), intervalMs: BEAT_MS, domains };
    client.workflow.signalWithStart('fleetRegistry', { workflowId: FLEET_REGISTRY_ID, taskQueue: FLEET_TASK_QUEUE, args: [{}], signal: 'hostBeat', signalArgs: [beat] }).catch(noop);
  };
  const first = setTimeout(() => {
    send();
    timer = setInterval(send, BEAT_MS);
  }, Math.random() * BEAT_MS);
  let timer: NodeJS.Timeout | undefined;
  return { stop: () => (clearTimeout(first), clearInterval(timer)) };
}

const judge = (h: FleetHost, now: number) => ({ ...h, alive: isAlive(h, now), ask: isAlive(h, now) || (h.drainingSince === undefined && isWorthAsking(h, now)), lost: isLost(h, now) });

/** The fleet queue's activities over the fleet's own read path: the index, or base's one registry. */
function fleetSide(client: Client, mode: Mode): { deps: ActivityDeps; fleetActs: Activities } {
  const deps = {
    fleet: {
      hosts: () => (mode === 'index' ? listHosts(client) : client.workflow.getHandle(FLEET_REGISTRY_ID).query<FleetHost[]>('fleet')),
      host: (h: string) => readHost(client, h),
      candidates: (d: string) => candidatesOf(client, d),
      terminate: async () => undefined,
    },
  } as unknown as ActivityDeps;
  const fleetActs = { fleetHosts: fleetHosts(deps), fleetHost: fleetHost(deps), placementCandidates: placementCandidates(deps) } as unknown as Activities;
  return { deps, fleetActs };
}

/** Waits until every simulated host has announced itself (one beat interval, plus start-up). */
async function allAnnounced(client: Client, mode: Mode, n: number): Promise<void> {
  const known = async () => (mode === 'index' ? (await client.workflow.count(ALL_ENTRIES)).count : (await client.workflow.getHandle(FLEET_REGISTRY_ID).query<FleetHost[]>('fleet').catch(() => [])).length);
  for (const end = Date.now() + BEAT_MS + 60_000; (await known()) < n; ) {
    if (Date.now() > end) throw new Error(`only ${await known()} of ${n} hosts announced`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * A fresh dev server with the fleet queue's worker, the hosts' workers from `hostWorkers`, and
 * every host beating the way `mode`'s code does; `body` runs once every host has announced
 * itself, and everything is stopped after it, however it ends.
 */
async function onFleet<T>(
  mode: Mode,
  n: number,
  code: Bundles,
  hosts: {
    workers: (common: WorkerCommon) => Promise<Worker[]>;
    libvirt: (h: number) => LibvirtClient;
    domains?: (h: number) => HostBeat['domains'];
    stagger?: boolean;
  },
  body: (client: Client, side: ReturnType<typeof fleetSide>) => Promise<T>,
): Promise<T> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: temporalBinary() }, searchAttributes: Object.values(SA) },
  });
  const client = env.client;
  const common: WorkerCommon = { connection: env.nativeConnection, namespace: env.namespace ?? 'default', shutdownGraceTime: '1s' };
  const side = fleetSide(client, mode);
  const workers: Worker[] = [await Worker.create({ ...common, taskQueue: FLEET_TASK_QUEUE, workflowBundle: { code: code.fleet }, activities: side.fleetActs }), ...(await hosts.workers(common))];
  const running = Promise.all(workers.map((w) => w.run()));
  const beats =
    mode === 'index'
      ? Array.from({ length: n }, (_, h) => new FleetBeat(client, { host: `sim-${h}`, taskQueue: `sim-${h}`, identity: workerIdentity(`sim-${h}`, 1) }, async () => hosts.libvirt(h), BEAT_MS, quiet))
      : [];
  const baseBeats = mode === 'base' ? Array.from({ length: n }, (_, h) => baseBeat(client, h, hosts.domains && (() => hosts.domains!(h)))) : [];
  try {
    // Staggered as real hosts are: each starts at a random moment of one interval.
    for (const b of beats) setTimeout(() => b.start(), hosts.stagger ? Math.random() * BEAT_MS : 0);
    await allAnnounced(client, mode, n);
    return await body(client, side);
  } finally {
    for (const b of beats) await b.leave(true).catch(noop);
    for (const b of baseBeats) b.stop();
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    await running.catch(noop);
    await env.teardown();
  }
}
type WorkerCommon = { connection: NativeConnection; namespace: string; shutdownGraceTime: '1s' };

async function measure(mode: Mode, n: number, code: Bundles): Promise<Row> {
  const fakes = new Map<string, FakeHost>();
  const hostOf = (workflowId: string) => {
    let f = fakes.get(workflowId.split('.on.')[0]!);
    if (!f) fakes.set(workflowId.split('.on.')[0]!, (f = new FakeHost(vmName(0, 0))));
    return f;
  };
  const workers = async (common: WorkerCommon) => {
    const ws = [
      await Worker.create({ ...common, taskQueue: 'sim-0', workflowBundle: { code: code.host }, activities: { ...scriptedActivities(hostOf), ...presence(0) } }),
      await Worker.create({ ...common, taskQueue: bulkTaskQueue('sim-0'), activities: scriptedActivities(hostOf) }),
    ];
    for (let h = 1; h < n; h++) ws.push(await Worker.create({ ...common, taskQueue: `sim-${h}`, activities: presence(h), maxConcurrentActivityTaskPolls: 1, maxConcurrentWorkflowTaskPolls: 1 }));
    return ws;
  };
  return onFleet(mode, n, code, { workers, libvirt: fakeLibvirt, stagger: true }, async (client, { deps, fleetActs }) => {
    // The hot spot: events/s into the busiest fleet workflow over two intervals.
    const hotId = mode === 'index' ? hostEntryId('sim-0') : FLEET_REGISTRY_ID;
    const len = async () => (await client.workflow.getHandle(hotId).describe()).historyLength;
    const runIdOf = async () => (await client.workflow.getHandle(hotId).describe()).runId;
    const [l0, r0, t0] = [await len(), await runIdOf(), Date.now()];
    const times: number[] = [];
    const locates: number[] = [];
    const taskWaits: number[] = [];
    let last: { router: temporal.api.history.v1.IHistoryEvent[]; child: temporal.api.history.v1.IHistoryEvent[] } | undefined;
    for (let r = 0; r <= RUNS; r++) {
      const id = `fleet-scale-${mode}-${n}-${r}`;
      const s = Date.now();
      await client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: vmName(0, 0), target: { clone: false } }], workflowExecutionTimeout: '5m' });
      if (r === 0) continue; // warm-up: caches, the first replay
      times.push(Date.now() - s);
      const router = (await client.workflow.getHandle(id).fetchHistory()).events ?? [];
      const child = (await client.workflow.getHandle(`${id}.on.sim-0`).fetchHistory()).events ?? [];
      const at = (e: temporal.api.history.v1.IHistoryEvent | undefined) => Number(e?.eventTime?.seconds ?? 0) * 1000 + Math.floor((e?.eventTime?.nanos ?? 0) / 1e6);
      locates.push(at(router.find((e) => e.startChildWorkflowExecutionInitiatedEventAttributes)) - at(router[0]));
      for (const e of router) {
        const scheduled = e.workflowTaskStartedEventAttributes ? router.find((x) => Number(x.eventId) === Number(e.workflowTaskStartedEventAttributes!.scheduledEventId)) : undefined;
        if (scheduled) taskWaits.push(at(e) - at(scheduled));
      }
      last = { router, child };
    }
    const dt = (Date.now() - t0) / 1000;
    const l1 = (await runIdOf()) === r0 ? await len() : l0 + (await len()); // one continue-as-new at most in the window
    const isAction = (e: temporal.api.history.v1.IHistoryEvent) =>
      !!(e.activityTaskScheduledEventAttributes || e.timerStartedEventAttributes || e.startChildWorkflowExecutionInitiatedEventAttributes || e.workflowExecutionSignaledEventAttributes || e.upsertWorkflowSearchAttributesEventAttributes || e.workflowExecutionStartedEventAttributes || e.signalExternalWorkflowExecutionInitiatedEventAttributes);
    const { router, child: childHist } = last!;
    // What one host-watch tick stores in the router's history: the activity's result.
    const now = Date.now();
    const tick = mode === 'index' ? await fleetActs.fleetHost({ host: 'sim-0' }) : (await deps.fleet!.hosts()).map((h) => judge(h, now));
    return {
      mode,
      hosts: n,
      routerEvents: router.length,
      childEvents: childHist.length,
      routerActivities: router.filter((e) => e.activityTaskScheduledEventAttributes).length,
      actions: router.filter(isAction).length + childHist.filter(isAction).length,
      hotEventsPerSec: (l1 - l0) / dt,
      hotWorkflow: hotId,
      watchBytesPerTick: JSON.stringify(tick).length,
      locateP50: quantile(locates, 0.5),
      locateP99: quantile(locates, 0.99),
      taskWaitP50: quantile(taskWaits, 0.5),
      runMsP50: quantile(times, 0.5),
    };
  });
}

/** Where each storm VM runs now (by name): presence answers and beats follow it. */
function stormPlacement(n: number) {
  const where = new Map<string, number>();
  for (let h = 0; h < n; h++) for (let v = 0; v < STORM_VMS; v++) where.set(vmName(h, v), h);
  const uuid = (name: string) => {
    const [h, v] = name.split('-').filter((x) => /^\d+$/.test(x)).map(Number) as [number, number];
    return uuidOf(h, v);
  };
  const here = (h: number) => [...where].filter(([, at]) => at === h).map(([name]) => name);
  return {
    where,
    presence: (h: number): Pick<Activities, 'domainPresence'> =>
      ({
        domainPresence: async (req: { domain: string; taskQueue: string }): Promise<Presence> => {
          const name = here(h).find((d) => d === req.domain || uuid(d) === req.domain);
          return name ? { host: `sim-${h}`, taskQueue: req.taskQueue, found: true, uuid: uuid(name), name, state: 'running' } : { host: `sim-${h}`, taskQueue: req.taskQueue, found: false };
        },
      }) as Pick<Activities, 'domainPresence'>,
    libvirt: (h: number): LibvirtClient => ({ listDomains: async () => here(h).map((name, i) => ({ name, uuid: uuid(name), id: i + 1 })) }) as unknown as LibvirtClient,
    beatDomains: (h: number) => here(h).map((name) => ({ name, uuid: uuid(name) })),
  };
}

interface StormRow {
  mode: Mode;
  hosts: number;
  runs: number;
  failures: Record<string, number>;
  mostFrozenOnAHost: number;
  mostFrozenOnCluster: number;
  moved: number;
  relocations: number;
  runsPerMin: number;
  routerEventsPerRun: number;
  childEventsPerRun: number;
  limitEventsPerRun: number;
  limitWorkflows: number;
}

/** Every VM of `n` hosts at once, each host a full worker; the limits bind on host and cluster. */
async function storm(mode: Mode, n: number, code: Bundles): Promise<StormRow> {
  const frozen = new Map<number, number>();
  let onCluster = 0;
  let mostHost = 0;
  let mostCluster = 0;
  const fakes = new Map<string, FakeHost>();
  const place = stormPlacement(n);
  let moved = 0;
  const runId = (h: number, v: number) => `storm-${mode}-${n}-${h}-${v}`;
  for (let h0 = 0; h0 < n; h0++) {
    for (let v = 0; v < STORM_VMS; v++) {
      const name = vmName(h0, v);
      const at = () => place.where.get(name)!;
      const moves = STORM_MOVE > 0 && (h0 * STORM_VMS + v) % STORM_MOVE === 0;
      let movedYet = false;
      let frozenAt: number | undefined;
      const f = new FakeHost(name)
        .script('inspectDomain', async (_req, real) => ({ ...(await real()), host: `sim-${at()}`, limits: STORM_LIMITS }))
        .script('freezeGuest', async (_req, real) => {
          if (moves && !movedYet) {
            // Migrated as the freeze is asked for: nothing frozen here, the guest is elsewhere.
            movedYet = true;
            moved++;
            place.where.set(name, (at() + 1) % n);
            // As the real freeze activity says it (activities/freeze.ts): gone, the freeze not sent.
            throw ApplicationFailure.create({ message: `${name} is not on this host`, type: FailureType.DomainNotFound, nonRetryable: true, details: [FREEZE_NOT_SENT] });
          }
          const out = await real();
          const h = (frozenAt = at());
          frozen.set(h, (frozen.get(h) ?? 0) + 1);
          mostHost = Math.max(mostHost, frozen.get(h)!);
          mostCluster = Math.max(mostCluster, ++onCluster);
          return out;
        })
        .script('snapshotDisks', async (_req, real) => {
          await new Promise((r) => setTimeout(r, 150));
          return real();
        })
        .script('thawGuest', async (_req, real) => {
          if (frozenAt !== undefined) {
            frozen.set(frozenAt, frozen.get(frozenAt)! - 1);
            onCluster--;
            frozenAt = undefined;
          }
          return real();
        });
      f.disks = ['vda'];
      fakes.set(runId(h0, v), f);
    }
  }
  const hostOf = (workflowId: string) => fakes.get(workflowId.split('.on.')[0]!)!;
  const workers = async (common: WorkerCommon) => {
    const ws: Worker[] = [];
    for (let h = 0; h < n; h++) {
      ws.push(await Worker.create({ ...common, taskQueue: `sim-${h}`, workflowBundle: { code: code.host }, activities: { ...scriptedActivities(hostOf), ...place.presence(h) } }));
      ws.push(await Worker.create({ ...common, taskQueue: bulkTaskQueue(`sim-${h}`), activities: scriptedActivities(hostOf) }));
    }
    return ws;
  };
  return onFleet(mode, n, code, { workers, libvirt: place.libvirt, domains: place.beatDomains }, async (client) => {
    const ids = [...fakes.keys()];
    const t0 = Date.now();
    const failures: Record<string, number> = {};
    await Promise.all(
      ids.map(async (id) => {
        const [h, v] = id.split('-').slice(-2).map(Number) as [number, number];
        try {
          await client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: vmName(h, v), quiesce: 'require', target: { clone: false } }], workflowExecutionTimeout: '15m' });
        } catch (err) {
          // The innermost failure that has a type: the child's, under the router's.
          let type = (err as Error).name;
          for (let c = err as { cause?: unknown; type?: string } | undefined; c; c = c.cause as typeof c) if (c.type) type = c.type;
          failures[type] = (failures[type] ?? 0) + 1;
        }
      }),
    );
    const minutes = (Date.now() - t0) / 60_000;
    // Visibility's history length is the closed runs'; a running one (an idle limit) is described.
    const events = async (query: string, keep: (id: string) => boolean = () => true) => {
      let sum = 0;
      let count = 0;
      for await (const w of client.workflow.list({ query })) {
        if (!keep(w.workflowId)) continue;
        sum += w.status.name === 'RUNNING' ? (await client.workflow.getHandle(w.workflowId, w.runId).describe()).historyLength : w.historyLength;
        count++;
      }
      return { sum, count };
    };
    const router = await events(`WorkflowId STARTS_WITH "storm-"`, (id) => !id.includes('.on.'));
    let relocations = 0;
    for (const id of ids) relocations += ((await client.workflow.getHandle(id).fetchHistory()).events ?? []).filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name === 'consistentSnapshot').length - 1;
    const child = await events(`WorkflowId STARTS_WITH "storm-"`, (id) => id.includes('.on.'));
    const limit = await events(`WorkflowId STARTS_WITH "${mode === 'index' ? 'vmsnap-limit-' : 'vmsnap-slot-'}"`);
    // Snapshot-only runs keep their snapshot; a freeze left behind is the failure.
    const stray = [...fakes.values()].flatMap((f) => f.leftovers().filter((l) => l.startsWith('guest'))).length;
    if (stray) failures['guests left frozen'] = stray;
    return {
      mode,
      hosts: n,
      runs: ids.length,
      failures,
      mostFrozenOnAHost: mostHost,
      mostFrozenOnCluster: mostCluster,
      moved,
      relocations,
      runsPerMin: ids.length / minutes,
      routerEventsPerRun: router.sum / ids.length,
      childEventsPerRun: child.sum / ids.length,
      limitEventsPerRun: limit.sum / ids.length,
      limitWorkflows: limit.count,
    };
  });
}

async function stormMain(): Promise<void> {
  const rows: StormRow[] = [];
  for (const mode of MODES) {
    const row = await storm(mode, STORM, await bundleOf(mode));
    rows.push(row);
    console.log(JSON.stringify(row));
  }
  console.log(`\nfleet storm: ${STORM} hosts × ${STORM_VMS} VMs started at once by name, every ${STORM_MOVE}th migrating at its freeze, beats every ${BEAT_MS} ms; limits ${STORM_LIMITS.windowsPerHost} windows/host, ${STORM_LIMITS.snapshotsPerCluster} snapshots/cluster\n`);
  console.log('| code | runs | failures | migrated / relocations | most frozen on a host / limit | on the cluster / limit | runs/min | router events/run | child events/run | limit workflows | limit events/run |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const f = Object.entries(r.failures).map(([k, v]) => `${k} ${v}`).join(', ') || '0';
    console.log(`| ${r.mode} | ${r.runs} | ${f} | ${r.moved} / ${r.relocations} | ${r.mostFrozenOnAHost} / ${STORM_LIMITS.windowsPerHost} | ${r.mostFrozenOnCluster} / ${STORM_LIMITS.snapshotsPerCluster} | ${r.runsPerMin.toFixed(1)} | ${r.routerEventsPerRun.toFixed(1)} | ${r.childEventsPerRun.toFixed(1)} | ${r.limitWorkflows} | ${r.limitEventsPerRun.toFixed(1)} |`);
  }
  const b = rows.find((r) => r.mode === 'base');
  const i = rows.find((r) => r.mode === 'index');
  if (b && i)
    console.log(`index/base: limit events/run ${(i.limitEventsPerRun / b.limitEventsPerRun).toFixed(2)}, child events/run ${(i.childEventsPerRun / b.childEventsPerRun).toFixed(2)}, runs/min ${(i.runsPerMin / b.runsPerMin).toFixed(2)}`);
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  if (STORM) return stormMain();
  const rows: Row[] = [];
  const broke: { mode: Mode; hosts: number; why: string }[] = [];
  const code = { index: await bundleOf('index'), base: MODES.includes('base') ? await bundleOf('base') : { host: '', fleet: '' } };
  for (const n of HOSTS) {
    for (const mode of MODES) {
      try {
        const row = await measure(mode, n, code[mode]);
        rows.push(row);
        console.log(JSON.stringify(row));
      } catch (err) {
        // What saturates first is a result, not a crash of the bench: the cell says what failed.
        const why = failureChain(err);
        broke.push({ mode, hosts: n, why });
        console.log(JSON.stringify({ mode, hosts: n, failed: why }));
      }
    }
  }
  console.log(`\nfleet scale: ${VMS} VMs per host, beats every ${BEAT_MS} ms, ${RUNS} runs per cell (snapshot-only, routed by VM name)\n`);
  console.log('| hosts | code | router events | child events | router activities | actions/run | hot workflow events/s | watch bytes/tick | locate p50 / p99 ms | router task wait p50 ms | run p50 ms |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.hosts} | ${r.mode} | ${r.routerEvents} | ${r.childEvents} | ${r.routerActivities} | ${r.actions} | ${r.hotEventsPerSec.toFixed(2)} | ${r.watchBytesPerTick} | ${r.locateP50} / ${r.locateP99} | ${r.taskWaitP50} | ${r.runMsP50} |`);
  }
  for (const b of broke) console.log(`| ${b.hosts} | ${b.mode} | failed: ${b.why} |||||||| |`);
  const first = (m: Mode) => rows.find((r) => r.mode === m)!;
  const lastOf = (m: Mode) => rows.filter((r) => r.mode === m).at(-1)!;
  for (const m of MODES) {
    const a = first(m);
    const b = lastOf(m);
    if (!a || !b) continue;
    console.log(`${m}: N ${a.hosts} → ${b.hosts}: actions/run ×${(b.actions / a.actions).toFixed(2)}, router events ×${(b.routerEvents / a.routerEvents).toFixed(2)}, hot workflow events/s ×${(b.hotEventsPerSec / Math.max(0.01, a.hotEventsPerSec)).toFixed(2)}, watch bytes ×${(b.watchBytesPerTick / a.watchBytesPerTick).toFixed(2)}`);
  }
  const big = lastOf('index');
  const perHost = big.hotEventsPerSec;
  const perEntry = 1000 / BEAT_MS;
  console.log(`at N = 1000, computed from the per-host rate: base's one registry takes ${(1000 * perEntry).toFixed(0)} signals/s (every beat); the index spreads them over 1000 entries, ${perEntry.toFixed(2)} signals/s and ${perHost.toFixed(2)} events/s each (measured on sim-0's entry)`);
  const sameN = rows.find((r) => r.mode === 'base' && r.hosts === big.hosts);
  if (sameN) console.log(`index/base at N = ${big.hosts}: actions/run ${(big.actions / sameN.actions).toFixed(2)}, router events ${(big.routerEvents / sameN.routerEvents).toFixed(2)}`);
}

/** Each failure's own words, outermost first: the cause a cell's table row names. */
function failureChain(err: unknown): string {
  const parts: string[] = [];
  for (let c = err as { cause?: unknown; message?: string; activityType?: string } | undefined; c; c = c.cause as typeof c) parts.push(c.activityType ? `${c.message} (${c.activityType})` : String(c.message));
  return parts.join(' ← ');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
