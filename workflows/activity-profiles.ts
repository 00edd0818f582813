import { patched, proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { RetryPolicy } from '@temporalio/common';
import type { Activities } from '../activities';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import { bulkTaskQueue } from '../src/model/naming';
import type { RestoreInput } from '../src/model/restore-input';
import type { SnapshotInput } from '../src/model/input';

/*
 * Every activity's timeout and retry profile, named, in one file. How many times a step is tried
 * is decided here; whether a failure can be retried at all is decided once, where it is made —
 * activities/failures.ts marks what a retry cannot change non-retryable, and no profile
 * overrides that with a list of its own.
 *
 * Freeze, snapshot and thaw are local activities: they run in the host worker that also runs
 * this workflow, so no Temporal server round trip sits inside the guest's freeze window, yet
 * each is still its own marker in the history the UI shows.
 */

/** The retry presets the profiles below are made of. */
const RETRY = {
  /** One try: the caller decides what silence means (it asks again later, or judges the answers). */
  once: { maximumAttempts: 1 },
  /** Reads and quick calls: a transient connection error gets two more tries. */
  few: { maximumAttempts: 3, initialInterval: '1s' },
  /** Quick idempotent steps inside the host worker. */
  fewLocal: { maximumAttempts: 3, initialInterval: '500ms' },
  /** Idempotent writes (clone, finalize, define, start, catalog records). */
  several: { maximumAttempts: 5, initialInterval: '1s' },
  /** Copies: a retry may restart a long copy, so it waits a little longer first. */
  copies: { maximumAttempts: 5, initialInterval: '2s' },
  /** Fleet bookkeeping on any worker of the fleet queue. */
  fleet: { maximumAttempts: 5, initialInterval: '500ms', maximumInterval: '5s' },
  /** Retention, heartbeating per image. */
  retention: { maximumAttempts: 5, initialInterval: '2s', maximumInterval: '30s' },
  /** Cleanup and undo must finish. */
  mustFinish: { maximumAttempts: 20, initialInterval: '1s', maximumInterval: '30s' },
  /** Never gives up (the escalated thaw). */
  untilDone: { initialInterval: '1s', maximumInterval: '10s', backoffCoefficient: 2 },
} as const satisfies Record<string, RetryPolicy>;

/**
 * Read-only checks (inspect the domain, check the target names), a few tries for transient
 * connection errors. Local activities in the host worker — the run's own host, whose libvirtd
 * they ask — since FEWER_ROUND_TRIPS: a server-tracked activity costs a schedule, a poll and a
 * workflow task each. Histories from before it scheduled them on the host's queue.
 */
export const inspection = () =>
  patched(FEWER_ROUND_TRIPS)
    ? proxyLocalActivities<Activities>({ startToCloseTimeout: '30s', retry: RETRY.few })
    : proxyActivities<Activities>({ startToCloseTimeout: '30s', retry: RETRY.few });

/**
 * Histories from before a run's checks were local activities and its limit turns were released
 * together, without a workflow task per release (docs/versioning.md).
 */
export const FEWER_ROUND_TRIPS = 'vmsnap-fewer-round-trips';

/** The freeze window: no automatic retry — a blind re-freeze or re-snapshot is never safe. */
export const freezeWindow = (input: SnapshotInput) =>
  proxyLocalActivities<Activities>({
    startToCloseTimeout: input.agentTimeoutSec * 1000 + input.snapshotTimeoutMs + 5000,
    retry: RETRY.once,
  });

/** Outside the window, in the host worker: quick idempotent preparation. */
export const prepareLocal = () =>
  proxyLocalActivities<Activities>({
    startToCloseTimeout: '30s',
    retry: RETRY.fewLocal,
  });

/**
 * How many local attempts a thaw gets before it gives up (`afterSnapshot`: the run's own thaw, after
 * which the compensation thaws again) or escalates to a server-tracked activity (`compensation`).
 */
export const THAW_ATTEMPTS = { afterSnapshot: 3, compensation: 5 } as const;

/** Thaw: quick retries inside the worker. */
export const thawLocal = (input: SnapshotInput, attempts: number) =>
  proxyLocalActivities<Activities>({
    startToCloseTimeout: input.agentTimeoutSec * 1000 + 10_000,
    retry: { maximumAttempts: attempts, initialInterval: '200ms', maximumInterval: '2s', backoffCoefficient: 2 },
  });

/** Thaw escalated past the local retries: a server-tracked activity that never gives up. */
export const thawEscalated = (input: SnapshotInput) =>
  proxyActivities<Activities>({
    startToCloseTimeout: input.agentTimeoutSec * 1000 + 10_000,
    retry: RETRY.untilDone,
  });

/*
 * Clone, flatten and finalize run on the host's bulk queue: same worker, few slots. With 50 runs
 * in flight on a 2-core host, unbounded copies made every freeze window 4.5x longer (bench/).
 */
const bulk = () => bulkTaskQueue(workflowInfo().taskQueue);

/** Clone and finalize: metadata-sized RBD operations (finalize may verify by reading). */
export const imageOps = (hostQueue?: string) =>
  proxyActivities<Activities>({
    // Another host's bulk queue when the step needs that host's libvirtd (the VM migrated there).
    taskQueue: hostQueue ? bulkTaskQueue(hostQueue) : bulk(),
    startToCloseTimeout: '2m',
    retry: RETRY.several,
  });

/**
 * Keeping a snapshot without a copy (snapshot-only mode): two owner-record writes, on the host
 * queue. On the bulk queue it waited behind every other run's clones and flattens (6.5–16.5 s at
 * 50 in flight, for ~0.4 s of work, bench/README.md) while the run held its domain lock.
 */
export const keepOps = () =>
  proxyActivities<Activities>({
    startToCloseTimeout: '2m',
    retry: RETRY.several,
  });

/** Flatten: long, heartbeating; a retry restarts from a fresh clone (see flattenDisk). */
export const flattening = (input: SnapshotInput) =>
  proxyActivities<Activities>({
    taskQueue: bulk(),
    startToCloseTimeout: input.flattenTimeoutMs,
    // Short enough that a dead worker's flatten is retried (from a fresh clone) within seconds.
    heartbeatTimeout: '10s',
    retry: RETRY.copies,
  });

/**
 * DR mode: the mirror snapshots after the thaw and the wait for the DR site's copies (reads of
 * the DR cluster, heartbeating each look), bounded by the input's waitMs; a retry after a lost
 * worker takes its mirror snapshots again (one more is harmless: rbd-mirror copies and prunes it).
 */
export const mirrorWait = (waitMs: number) =>
  proxyActivities<Activities>({
    startToCloseTimeout: waitMs + 60_000,
    heartbeatTimeout: '30s',
    retry: RETRY.few,
  });

/** Cleanup must finish: many retries, generous timeouts (a late-snapshot watch heartbeats). */
export const cleanup = () =>
  proxyActivities<Activities>({
    startToCloseTimeout: '10m',
    heartbeatTimeout: '30s',
    retry: RETRY.mustFinish,
  });

/** Retention after a successful run: lists and prunes a schedule's images, heartbeating per image. */
export const retention = () =>
  proxyActivities<Activities>({
    startToCloseTimeout: '10m',
    heartbeatTimeout: '1m',
    retry: RETRY.retention,
  });

/* restoreVm */

/** Read-only planning. */
export const restorePlanning = () => proxyActivities<Activities>({ startToCloseTimeout: '1m', retry: RETRY.few });

/** Clone, flatten and verify share the host's bulk slots with snapshot copies. */
export const restoreCopies = (input: RestoreInput) =>
  proxyActivities<Activities>({
    taskQueue: bulk(),
    startToCloseTimeout: input.flatten ? '2h' : '10m',
    heartbeatTimeout: '30s',
    retry: RETRY.copies,
  });

/** Define and start: quick libvirt calls. */
export const restoreDomainOps = () => proxyActivities<Activities>({ startToCloseTimeout: '1m', retry: RETRY.several });

/** Waiting on the guest (shutdown, agent): bounded by the input's timeouts, heartbeating. */
export const restoreWaits = (timeoutMs: number) =>
  proxyActivities<Activities>({ startToCloseTimeout: timeoutMs + 30_000, heartbeatTimeout: '15s', retry: RETRY.few });

/** The undo must finish. */
export const restoreUndo = () => proxyActivities<Activities>({ startToCloseTimeout: '5m', retry: RETRY.mustFinish });

/* The fleet queue */

/** Registry reads and fleet bookkeeping: any worker of the fleet queue. */
export const fleetOps = () => proxyActivities<Activities>({ taskQueue: FLEET_TASK_QUEUE, startToCloseTimeout: '10s', retry: RETRY.fleet });

/** Reading and writing the catalog in Ceph: any worker of the fleet queue. */
export const catalogOps = () => proxyActivities<Activities>({ taskQueue: FLEET_TASK_QUEUE, startToCloseTimeout: '1m', retry: RETRY.several });

/** One host's answer, or none: a host that cannot take the task within 5 s is not waited for. */
export const presenceOn = (taskQueue: string) => proxyActivities<Activities>({ taskQueue, scheduleToCloseTimeout: '5s', retry: RETRY.once });

/** One host's answer, or none within 10 s: its silence keeps every disk asked about. */
export const definedOn = (taskQueue: string) => proxyActivities<Activities>({ taskQueue, scheduleToCloseTimeout: '10s', retry: RETRY.once });

/** The hand-off's thaw on one host: a host that does not take it within the bound is asked again on the next look, not waited on. */
export const handOffThawOn = (taskQueue: string, agentTimeoutSec: number) =>
  proxyActivities<Activities>({
    taskQueue,
    startToCloseTimeout: agentTimeoutSec * 1000 + 10_000,
    scheduleToCloseTimeout: agentTimeoutSec * 1000 + 20_000,
    retry: RETRY.once,
  });
