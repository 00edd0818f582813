import { proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FailureType } from '../src/model/failures';
import { bulkTaskQueue } from '../src/model/naming';
import type { SnapshotInput } from '../src/model/input';

/*
 * Named timeout/retry profiles. Freeze, snapshot and thaw are local activities: they run in the
 * host worker that also runs this workflow, so no Temporal server round trip sits inside the
 * guest's freeze window, yet each is still its own marker in the history the UI shows.
 */

const NON_RETRYABLE = [
  FailureType.InvalidInput,
  FailureType.DomainNotFound,
  FailureType.DomainNotRunning,
  FailureType.UnsupportedDisk,
  FailureType.QuiesceUnavailable,
  FailureType.NameConflict,
  FailureType.PoolUnavailable,
  FailureType.PermissionDenied,
  FailureType.GuestFrozenByOther,
];

/** Read-only checks: cheap, retried a few times for transient connection errors. */
export const inspection = () =>
  proxyActivities<Activities>({
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 3, initialInterval: '1s', nonRetryableErrorTypes: NON_RETRYABLE },
  });

/** The freeze window: no automatic retry — a blind re-freeze or re-snapshot is never safe. */
export const freezeWindow = (input: SnapshotInput) =>
  proxyLocalActivities<Activities>({
    startToCloseTimeout: input.agentTimeoutSec * 1000 + input.snapshotTimeoutMs + 5000,
    retry: { maximumAttempts: 1 },
  });

/** Outside the window, in the host worker: quick idempotent preparation. */
export const prepareLocal = () =>
  proxyLocalActivities<Activities>({
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 3, initialInterval: '500ms' },
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
    retry: { initialInterval: '1s', maximumInterval: '10s', backoffCoefficient: 2 },
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
    retry: { maximumAttempts: 5, initialInterval: '1s', nonRetryableErrorTypes: NON_RETRYABLE },
  });

/** Flatten: long, heartbeating; a retry restarts from a fresh clone (see flattenDisk). */
export const flattening = (input: SnapshotInput) =>
  proxyActivities<Activities>({
    taskQueue: bulk(),
    startToCloseTimeout: input.flattenTimeoutMs,
    // Short enough that a dead worker's flatten is retried (from a fresh clone) within seconds.
    heartbeatTimeout: '10s',
    retry: { maximumAttempts: 5, initialInterval: '2s', nonRetryableErrorTypes: NON_RETRYABLE },
  });

/** Cleanup must finish: many retries, generous timeouts (a late-snapshot watch heartbeats). */
export const cleanup = () =>
  proxyActivities<Activities>({
    startToCloseTimeout: '10m',
    heartbeatTimeout: '30s',
    retry: { maximumAttempts: 20, initialInterval: '1s', maximumInterval: '30s' },
  });

/** Retention after a successful run: lists and prunes a schedule's images, heartbeating per image. */
export const retention = () =>
  proxyActivities<Activities>({
    startToCloseTimeout: '10m',
    heartbeatTimeout: '1m',
    retry: { maximumAttempts: 5, initialInterval: '2s', maximumInterval: '30s', nonRetryableErrorTypes: NON_RETRYABLE },
  });
