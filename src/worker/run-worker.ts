import type http from 'node:http';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../../activities';
import { hostTaskQueue } from '../config';
import type { Config } from '../config';
import { hostMetrics } from '../host/metrics';
import type { Metrics } from '../host/metrics';
import { FreezeJournal } from '../safety/freeze-journal';
import { releaseFreedMemory } from '../ceph';
import { createHostDeps } from './host-deps';
import type { HostDeps } from './host-deps';
import { jsonLogger, sdkLogFunction, sdkLogLevel } from './logger';
import type { Logger } from './logger';
import { reconcile } from '../safety/reconcile';
import { lockStateDir } from '../host/state-dir-lock';
import { untilConnected } from './until-connected';
import { Sweeper } from '../safety/sweeper';
import { OrphanReaper } from './orphan-reaper';
import { resolveScope } from './scope';
import { flattenProgressSignal } from '../../workflows/progress';
import { connectionOptions } from '../temporal-connection';
import { requirePreparedNamespace } from '../temporal-setup';
import { NamespaceNotPreparedError } from '../temporal-namespace';
import { fleetWorkflowCode, runEndInterceptorPath, runLogInterceptorPath, workflowCode } from './workflows-path';
import { activityLogInterceptor } from './run-log';
import { bulkTaskQueue } from '../model/naming';
import { FLEET_TASK_QUEUE, workerIdentity } from '../model/fleet';
import { FleetBeat, terminateRun } from './fleet-beat';
import { listHosts, placementCandidates, readHost } from './fleet-index';
import { fleetGauges, indexFleet } from './fleet-metrics';
import { metricsEndpoint, metricsUrl as urlOf, serveMetrics } from './metrics-endpoint';
import { journalGauges } from './journal-metrics';
import { runSinks } from './run-sinks';
import { handOffVia } from '../safety/hand-off';

export interface HostWorker {
  worker: Worker;
  /** Activities only, on `<taskQueue>-bulk`: clone, flatten, finalize, `bulkConcurrency` at a time. */
  bulkWorker: Worker;
  /** The fleet queue every host polls: runs started by VM name, the registry, hand-off thaws. */
  fleetWorker: Worker;
  beat: FleetBeat;
  deps: HostDeps;
  sweeper: Sweeper;
  reaper: OrphanReaper;
  taskQueue: string;
  metricsUrl?: string;
  /** Runs until shutdown; resolves after connections are closed. */
  run(): Promise<void>;
  /**
   * Stops the worker. Its host drains in the fleet ("back soon": a restart), or with
   * `retire` leaves it for good (a one-shot worker such as the demo's, a decommissioned host).
   */
  shutdown(opts?: { retire?: boolean }): void;
}

let runtimeInstalled = false;

/**
 * The SDK's Rust core and the crates under it, by our level. Capped: the core's debug lines are its
 * state machine (measured: 168 for one snapshot run of a 3-disk guest, with a run id and no
 * workflow id), the crates' (gRPC, HTTP/2) are per frame — neither answers an operator's question
 * about a run.
 */
const CORE_FILTER = {
  ERROR: { core: 'ERROR', other: 'ERROR' },
  WARN: { core: 'WARN', other: 'WARN' },
  INFO: { core: 'INFO', other: 'WARN' },
  DEBUG: { core: 'INFO', other: 'WARN' },
} as const;

/**
 * One worker per hypervisor host. It runs the workflows and activities of its own task queue,
 * because freeze/snapshot/thaw are local activities that must run beside this host's libvirtd,
 * and the copy steps of its bulk queue with `bulkConcurrency` slots.
 */
export async function createHostWorker(
  config: Config,
  log: Logger = jsonLogger({ host: config.host }, process.stderr, { level: config.logLevel }),
  opts: {
    workflows?: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'>;
    /** The fleet queue's (workflows/fleet.ts); bundled at start from the sources when not given. */
    fleetWorkflows?: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'>;
    signal?: AbortSignal;
  } = {},
): Promise<HostWorker> {
  const metrics = hostMetrics();
  const sdkMetricsPort = config.metricsPort ? config.metricsPort + 1 : 0;
  if (!runtimeInstalled) {
    // Once per process (the first worker's level holds): the SDK's lines — its own, the core's,
    // and the workflows' (their logger is a sink into this one) — at our level, as our JSON lines.
    // Without `forward` the core writes to stderr itself, in its own format. Its metrics on port+1.
    const level = sdkLogLevel(config.logLevel);
    Runtime.install({
      logger: new DefaultLogger(level, sdkLogFunction(log)),
      telemetryOptions: {
        logging: { forward: {}, filter: CORE_FILTER[level] },
        ...(sdkMetricsPort ? { metrics: { prometheus: { bindAddress: `127.0.0.1:${sdkMetricsPort}` } } } : {}),
      },
    });
    runtimeInstalled = true;
  }
  log.info('worker starting', { stateDir: config.stateDir });
  // One worker per state dir. Holding the lock proves its previous holder dead: only then may its
  // journaled freezes be thawed and its librados sessions fenced.
  const lock = await lockStateDir(config.stateDir);
  const deps = createHostDeps(config, metrics, log);
  const taskQueue = hostTaskQueue(config.host);
  const sweeper = new Sweeper(deps.libvirt, deps.guard, metrics, log, config.sweepIntervalMs, 1000, config.clockSkewMs);
  const opened: { client?: Client; connection?: NativeConnection; server?: http.Server } = {};
  // The Temporal workers once they exist: /healthz and vmsnap_temporal_up read them at each request.
  const serving: Worker[] = [];
  metrics.onScrape(journalGauges(new FreezeJournal(config.stateDir), log));
  metrics.onScrape(temporalGauge(serving));
  try {
    // The endpoint first, before Ceph and Temporal are reached (which may take long, or forever):
    // a worker stuck at start shows on /metrics as up, with vmsnap_ceph_up or vmsnap_temporal_up 0.
    let metricsUrl: string | undefined;
    let listening: Promise<void> = Promise.resolve();
    if (config.metricsPort) {
      const endpoint = serveMetrics(metricsEndpoint(() => serving, metrics, sdkMetricsPort), config.metricsAddress, config.metricsPort);
      opened.server = endpoint.server;
      listening = endpoint.listening;
      listening.catch(() => undefined); // awaited below, after the thaw
      metricsUrl = urlOf(config.metricsAddress, config.metricsPort);
    }

    // Thaw first, before and independent of Ceph and Temporal: a guest frozen by a dead
    // predecessor must not wait for monitors or the Temporal server (nor for a port in use).
    const thawed = await reconcile(deps.libvirt, deps.guard, metrics, log, config.clockSkewMs);
    if (thawed.length) log.warn('reconciled frozen-guest journal at start', { entries: thawed });
    sweeper.start();
    await listening;
    if (metricsUrl) log.info('metrics endpoint up', { metrics: metricsUrl });

    await untilConnected('ceph', log, opts.signal, async () => {
      // Fence what the dead predecessor left (its watches would stall our snapshots), then record ours.
      const cluster = await deps.rados();
      await deps.fence.fencePrevious(cluster, log);
      await deps.fence.record('worker', await cluster.addrs());
      // The snapshotter process must be up before the first freeze: its start is not paid inside a window.
      await deps.snapshotter.start();
    });
    metrics.cephUp.set(1);

    const connOpts = connectionOptions(config);
    const clientConnection = await untilConnected('temporal', log, opts.signal, () => Connection.connect(connOpts));
    const client = new Client({ connection: clientConnection, namespace: config.temporal.namespace });
    opened.client = client;
    // Before any poller: on an unprepared namespace every run would fail its first upsert, over
    // and over; better one line naming `vmsnap setup` and an exit (the journal is thawed by now).
    // A server that does not let this client list them (permissions, a hosted namespace) is not
    // proof of absence: the worker starts and says so.
    await requirePreparedNamespace(clientConnection, config.temporal.namespace).catch((err: unknown) => {
      if (err instanceof NamespaceNotPreparedError) throw err;
      log.warn('cannot list the namespace search attributes; starting anyway', { error: String(err) });
    });
    deps.scope = await resolveScope(config, client);
    const connection = await untilConnected('temporal (worker)', log, opts.signal, () => NativeConnection.connect(connOpts));
    opened.connection = connection;
    const reaper = new OrphanReaper(deps, client, config.imagePool, log, config.reapIntervalMs, config.ownerRecordHorizonMs, config.keepReplacedMs);
    deps.fleet = {
      hosts: () => listHosts(client),
      host: (host) => readHost(client, host),
      candidates: (domain) => placementCandidates(client, domain),
      terminate: (id, reason) => terminateRun(client, id, reason),
    };
    sweeper.handOff = handOffVia(client, config.host, (uuid) => deps.guard.obligationOf(uuid));
    deps.reportProgress = async (workflowId, progress) => {
      await client.workflow.getHandle(workflowId).signal(flattenProgressSignal, progress as never);
    };

    const activities = createActivities(deps);
    const workflows = opts.workflows ?? workflowCode();
    const identity = workerIdentity(config.host, process.pid);
    const worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue,
      ...workflows,
      // Each snapshot run's end, told by the run-end interceptor, and the domain on its log lines
      // (a prebuilt bundle has both built in).
      interceptors: { activity: [activityLogInterceptor], ...(workflows.workflowsPath ? { workflowModules: [runEndInterceptorPath(), runLogInterceptorPath()] } : {}) },
      sinks: runSinks(metrics),
      activities,
      shutdownGraceTime: '30s',
      identity,
    });
    const bulkWorker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: bulkTaskQueue(taskQueue),
      activities,
      interceptors: { activity: [activityLogInterceptor] },
      maxConcurrentActivityTaskExecutions: config.bulkConcurrency,
      shutdownGraceTime: '30s',
      identity,
    });

    // The same workflow types, but consistentSnapshot and restoreVm are the routers here.
    const fleetWorkflows = opts.fleetWorkflows ?? fleetWorkflowCode();
    const fleetWorker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: FLEET_TASK_QUEUE,
      ...fleetWorkflows,
      interceptors: { activity: [activityLogInterceptor], ...(fleetWorkflows.workflowsPath ? { workflowModules: [runLogInterceptorPath()] } : {}) },
      activities,
      shutdownGraceTime: '30s',
      identity,
    });
    const beat = new FleetBeat(client, { host: config.host, taskQueue, identity, lostAfterMs: config.fleetHostLostAfterMs }, deps.libvirtReadOnly, config.fleetBeatMs, log);
    metrics.onScrape(fleetGauges(indexFleet(client, config.host), log));

    const all = [worker, bulkWorker, fleetWorker];
    serving.push(...all);
    let retire = false;
    return {
      worker,
      bulkWorker,
      fleetWorker,
      beat,
      deps,
      sweeper,
      reaper,
      taskQueue,
      metricsUrl,
      async run() {
        sweeper.start();
        reaper.start();
        beat.start();
        // Copies free large librbd buffers; without a trim glibc keeps them and RSS only grows.
        const trim = setInterval(() => releaseFreedMemory(), 5_000);
        trim.unref();
        log.info('worker started', {
          taskQueue,
          bulkSlots: config.bulkConcurrency,
          workflowCode: workflows.workflowBundle ? 'prebuilt bundle' : 'bundled at start',
          namespace: config.temporal.namespace,
          metrics: metricsUrl,
        });
        try {
          // One stops, all stop: a host worker without its bulk half would leave copies unpolled.
          const runs = all.map((w) => w.run().then(() => undefined, (err: unknown) => ({ err })));
          await Promise.race(runs);
          for (const w of all) if (w.getState() === 'RUNNING') w.shutdown();
          const failed = (await Promise.all(runs)).find((r) => r !== undefined);
          if (failed) throw failed.err;
        } finally {
          clearInterval(trim);
          await beat.leave(retire);
          await reaper.halt();
          await closeAll(sweeper, deps, opened, lock);
          log.info('worker stopped', { taskQueue });
        }
      },
      shutdown(opts) {
        retire ||= !!opts?.retire;
        for (const w of all) if (w.getState() === 'RUNNING') w.shutdown();
      },
    };
  } catch (err) {
    await closeAll(sweeper, deps, opened, lock);
    throw err;
  }
}

/** vmsnap_temporal_up: the Temporal workers exist and all poll (the first two answer /healthz). */
function temporalGauge(workers: Pick<Worker, 'getState'>[]) {
  return {
    read: async () => workers.length > 0 && workers.every((w) => w.getState() === 'RUNNING'),
    publish: (m: Metrics, up: boolean) => m.temporalUp.set(up ? 1 : 0),
    unavailable: (m: Metrics) => m.temporalUp.set(0),
  };
}

async function closeAll(
  sweeper: Sweeper,
  deps: HostDeps,
  opened: { client?: Client; connection?: NativeConnection; server?: http.Server },
  lock: { release(): Promise<void> },
): Promise<void> {
  await sweeper.halt();
  opened.server?.close();
  await deps.close();
  await opened.connection?.close().catch(() => undefined);
  await opened.client?.connection.close().catch(() => undefined);
  await lock.release();
}
