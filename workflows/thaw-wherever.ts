import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import type { ActivityOptions } from '@temporalio/common';
import { deprecatePatch, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FailureType } from '../src/model/failures';
import type { ThawResult } from '../src/model/types';
import { locate } from './locate';

export interface ThawWhereverRequest {
  domainUuid: string;
  domainName: string;
  agentTimeoutSec: number;
  /** The host that froze the guest and can no longer reach it (it migrated away). */
  fromHost: string;
  /** Whose freeze (`<workflowId>/<runId>`), for the logs of the host that thaws it. */
  owner?: string;
  /** How long to keep looking for the domain before saying it runs nowhere. */
  searchMs?: number;
}

export type ThawWhereverResult =
  | { outcome: 'thawed'; host: string; thaw: ThawResult }
  /** The domain runs on no live host (stopped, or undefined everywhere): nothing can be frozen. */
  | { outcome: 'not-running'; message: string };

/** The thaw on the host that runs the guest now: retried by the server until it answers. */
const thawOn = (taskQueue: string, agentTimeoutSec: number, retry: ActivityOptions['retry'] = {}) =>
  proxyActivities<Activities>({
    taskQueue,
    startToCloseTimeout: agentTimeoutSec * 1000 + 10_000,
    scheduleToCloseTimeout: '2m',
    retry: { initialInterval: '200ms', maximumInterval: '2s', backoffCoefficient: 2, ...retry },
  });

/** Deprecated patch (docs/versioning.md): histories before it scheduled the hand-off thaw as thawGuest (layer `handoff`). */
const HANDOFF_ACTIVITY = 'vmsnap-handoff-activity';

/** The SDK's answer when the polling worker has no such activity (a release from before it). */
const NOT_REGISTERED = 'NotFoundError';

async function thawThere(req: ThawWhereverRequest, at: { host: string; taskQueue: string }): Promise<ThawResult> {
  const summary = { summary: `thaw ${req.domainName} on ${at.host} (moved from ${req.fromHost})` };
  const arrived = { domainUuid: req.domainUuid, domainName: req.domainName, agentTimeoutSec: req.agentTimeoutSec, ...(req.owner ? { owner: req.owner } : {}) };
  deprecatePatch(HANDOFF_ACTIVITY);
  try {
    // Not retried when unknown there: a frozen guest must not wait 2 minutes for a host's upgrade.
    // Not a failure's retryability: the SDK's answer from a worker of a release without the activity.
    // eslint-disable-next-line no-restricted-syntax
    return await thawOn(at.taskQueue, req.agentTimeoutSec, { nonRetryableErrorTypes: [NOT_REGISTERED] }).thawArrivedGuest.executeWithOptions(summary, [arrived]);
  } catch (err) {
    if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === NOT_REGISTERED)) throw err;
  }
  // An old release's thawGuest makes the same check for layer `handoff`.
  return thawOn(at.taskQueue, req.agentTimeoutSec).thawGuest.executeWithOptions(summary, [{ ...arrived, thawedBy: 'handoff' }]);
}

/**
 * Thaws a guest vmsnap froze on one host and that now runs on another (a live migration carries
 * a frozen guest across frozen). The one hand-off path: the run's own thaw, the old host's
 * sweeper and its start-up reconcile all come here when their host says the domain is gone. It
 * never guesses: while the domain is in flight (paused on the destination) or a live host has not
 * answered, it keeps looking; it reports `not-running` only after `searchMs` without the domain
 * running anywhere.
 */
export async function thawWherever(req: ThawWhereverRequest): Promise<ThawWhereverResult> {
  const searchUntil = Date.now() + (req.searchMs ?? 30_000);
  for (let pause = 250; ; pause = Math.min(pause * 2, 2000)) {
    const at = await locate(req.domainUuid);
    if (at.ok) {
      const thaw = await thawThere(req, at);
      // Shut off or gone there too between the lookup and the thaw: look again.
      if (!thaw.domainGone) return { outcome: 'thawed', host: at.host, thaw };
    } else if (Date.now() >= searchUntil) {
      if (at.why === 'not-found' || at.why === 'not-running') return { outcome: 'not-running', message: at.message };
      throw ApplicationFailure.retryable(`cannot place ${req.domainName} to thaw it: ${at.message}`, FailureType.DomainNotPlaced);
    }
    await sleep(pause);
  }
}
