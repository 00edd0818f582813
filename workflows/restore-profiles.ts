import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { bulkTaskQueue } from '../src/model/naming';
import type { RestoreInput } from '../src/model/restore-input';

/* Timeout/retry profiles of restoreVm. Typed failures are non-retryable at their source. */

/** Read-only planning: retried a few times for transient connection errors. */
export const restorePlanning = () =>
  proxyActivities<Activities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 3, initialInterval: '1s' } });

/** Clone, flatten and verify share the host's bulk slots with snapshot copies. */
export const restoreCopies = (input: RestoreInput) =>
  proxyActivities<Activities>({
    taskQueue: bulkTaskQueue(workflowInfo().taskQueue),
    startToCloseTimeout: input.flatten ? '2h' : '10m',
    heartbeatTimeout: '30s',
    retry: { maximumAttempts: 5, initialInterval: '2s' },
  });

/** Define and start: quick libvirt calls. */
export const restoreDomainOps = () =>
  proxyActivities<Activities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 5, initialInterval: '1s' } });

/** Waiting on the guest (shutdown, agent): bounded by the input's timeouts, heartbeating. */
export const restoreWaits = (timeoutMs: number) =>
  proxyActivities<Activities>({
    startToCloseTimeout: timeoutMs + 30_000,
    heartbeatTimeout: '15s',
    retry: { maximumAttempts: 3, initialInterval: '1s' },
  });

/** The undo must finish: many retries. */
export const restoreUndo = () =>
  proxyActivities<Activities>({
    startToCloseTimeout: '5m',
    retry: { maximumAttempts: 20, initialInterval: '1s', maximumInterval: '30s' },
  });
