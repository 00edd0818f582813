import { randomUUID } from 'node:crypto';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { WorkflowNotFoundError } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import type { InjectedSinks } from '@temporalio/worker';
import type { RunSinks } from '../../src/model/run-end';
import { afterAll, beforeAll, inject } from 'vitest';
import { bulkTaskQueue, lockWorkflowId } from '../../src/model/naming';
import { FLEET_TASK_QUEUE } from '../../src/model/fleet';
import type { SnapshotRequest } from '../../src/model/input';
import { SA } from '../../src/model/search-attributes';
import type { consistentSnapshot } from '../../workflows';
import { scriptedActivities, type FakeHost } from '../../support/fast/fake-host';
import { temporalBinary } from '../../support/fast/temporal-binary';

/**
 * The real workflow code on a throwaway Temporal dev server (the lab's own CLI binary, a random
 * free port: never the lab's 7233) with scripted activities — the fast lane's stand-in for a
 * host worker. Both of the host's queues are polled, as createHostWorker polls them.
 */
export class WorkflowLane {
  private readonly hosts = new Map<string, FakeHost>();
  private running: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly env: TestWorkflowEnvironment,
    private readonly workers: Worker[],
    readonly taskQueue: string,
  ) {}

  /**
   * `workflowBundle`: another bundle than the lane's shared one (one with the run-end interceptor,
   * say), its host queue's worker given `sinks`.
   */
  static async start(opts: { workflowBundle?: string; sinks?: InjectedSinks<RunSinks> } = {}): Promise<WorkflowLane> {
    quietRuntime();
    const env = await TestWorkflowEnvironment.createLocal({
      server: { executable: { type: 'existing-path', path: temporalBinary() }, searchAttributes: Object.values(SA) },
    });
    const taskQueue = `fast-lane-${randomUUID().slice(0, 8)}`;
    const lane = new WorkflowLane(env, [], taskQueue);
    const activities = scriptedActivities((id) => lane.hostOf(id));
    const common = { connection: env.nativeConnection, namespace: env.namespace ?? 'default', activities, shutdownGraceTime: '1s' as Duration };
    lane.workers.push(
      await Worker.create({ ...common, taskQueue, workflowBundle: { code: opts.workflowBundle ?? inject('workflowBundle') }, ...(opts.sinks ? { sinks: opts.sinks } : {}) }),
      await Worker.create({ ...common, taskQueue: bulkTaskQueue(taskQueue) }),
      // The fleet limits' queues run there (workflows/fleet-limit.ts), as on every host worker.
      await Worker.create({ ...common, taskQueue: FLEET_TASK_QUEUE, workflowBundle: { code: inject('fleetWorkflowBundle') } }),
    );
    lane.running = Promise.all(lane.workers.map((w) => w.run()));
    return lane;
  }

  get client(): Client {
    return this.env.client;
  }

  /** Starts a consistentSnapshot run against `host`; its workflow id routes the activities there. */
  async start(
    host: FakeHost,
    request: Omit<SnapshotRequest, 'domain'>,
    opts: { workflowTaskTimeout?: Duration; workflowId?: string } = {},
  ): Promise<WorkflowHandle<typeof consistentSnapshot>> {
    const { workflowId = `snap-${host.domain.name}`, ...options } = opts;
    this.hosts.set(workflowId, host);
    return this.client.workflow.start<typeof consistentSnapshot>('consistentSnapshot', {
      taskQueue: this.taskQueue,
      workflowId,
      args: [{ domain: host.domain.name, ...request }],
      workflowExecutionTimeout: '1m',
      ...options,
    });
  }

  /** The domain lock's state after a run: COMPLETED once released, `none` if never taken. */
  async lockState(host: FakeHost): Promise<string> {
    try {
      return (await this.client.workflow.getHandle(lockWorkflowId(host.domain.uuid)).describe()).status.name;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'none';
      throw err;
    }
  }

  async stop(): Promise<void> {
    for (const h of this.hosts.values()) h.releaseHung();
    for (const w of this.workers) if (w.getState() === 'RUNNING') w.shutdown();
    await this.running;
    await this.env.teardown();
  }

  private hostOf(workflowId: string): FakeHost {
    const host = this.hosts.get(workflowId);
    if (!host) throw new Error(`no fake host for workflow ${workflowId}`);
    return host;
  }
}

let installed = false;

/** The SDK's and the workflows' logs at ERROR only (VMSNAP_SDK_LOG_LEVEL to see more), once per process. */
export function quietRuntime(): void {
  if (installed) return;
  const level = (process.env.VMSNAP_SDK_LOG_LEVEL as 'WARN' | undefined) ?? 'ERROR';
  Runtime.install({ logger: new DefaultLogger(level) });
  installed = true;
}

/** The lane of one test file: started before its tests, stopped after them. */
export function useWorkflowLane(): () => WorkflowLane {
  let lane: WorkflowLane | undefined;
  beforeAll(async () => {
    lane = await WorkflowLane.start();
  }, 60_000);
  afterAll(async () => {
    await lane?.stop();
  });
  return () => {
    if (!lane) throw new Error('the workflow lane is not started (use it inside a test)');
    return lane;
  };
}

/** `temporal workflow reset --type FirstWorkflowTask`, through the API the CLI calls. */
export async function resetToFirstTask(client: Client, workflowId: string): Promise<string> {
  const old = client.workflow.getHandle(workflowId);
  const { runId } = await old.describe();
  const first = (await old.fetchHistory()).events!.find((e) => e.workflowTaskCompletedEventAttributes)!;
  const { runId: newRunId } = await client.workflowService.resetWorkflowExecution({
    namespace: 'default',
    workflowExecution: { workflowId, runId },
    workflowTaskFinishEventId: first.eventId,
    reason: 'operator retry (unit)',
    requestId: randomUUID(),
  });
  return newRunId!;
}
