import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { continueAsNew, sleep } from '@temporalio/workflow';
import type { FreezeObligation } from '../src/model/freeze-obligation';
import type { ThawResult } from '../src/model/types';
import { fleetOps, handOffThawOn } from './activity-profiles';
import { locate } from './locate';

export interface HandOffRequest {
  domainUuid: string;
  domainName: string;
  agentTimeoutSec: number;
  /** The host that froze the guest and can no longer reach it. */
  fromHost: string;
  owner?: string;
  /** The freeze's obligation id; absent for a journal entry written before obligations existed. */
  freezeId?: string;
  disks?: FreezeObligation['disks'];
  /** Looks so far, carried across continue-as-new (for the log and the backoff). */
  looks?: number;
}

export type HandOffResult =
  /** Thawed here, by this hand-off, on the host the guest runs on now. */
  | { outcome: 'thawed'; host: string; thaw: ThawResult }
  /** The obligation was resolved by someone else first: the destination's arrival guard or worker, or an operator. */
  | { outcome: 'resolved' }
  /** Running nowhere: no host runs it and no QEMU has its disks open (rbd watchers). Nothing can be frozen. */
  | { outcome: 'nowhere'; message: string };

/** Looks per run before continue-as-new: the history of a hand-off that waits days stays small. */
const LOOKS_PER_RUN = 200;

/**
 * The Temporal half of a freeze obligation: thaws a guest vmsnap froze on one host and that now
 * runs — or will run — on another. It never gives up and never guesses: a domain that is paused,
 * found on no live host, or on a host whose worker does not answer is looked for again, with
 * backoff, for as long as its obligation is open. It ends when a thaw is proven where the guest
 * runs, when somebody else resolved the obligation (the Ceph half: the destination's arrival
 * guard), or when the guest provably runs nowhere. One per freeze: its id is the freeze's.
 */
export async function handOffFreeze(req: HandOffRequest): Promise<HandOffResult> {
  let looks = req.looks ?? 0;
  for (let i = 0; i < LOOKS_PER_RUN; i++, looks++) {
    // Unknown (Ceph or the fleet queue away) counts as open: the answer that keeps looking.
    const open = req.freezeId ? await fleetOps().freezeObligationOpen({ domainUuid: req.domainUuid, freezeId: req.freezeId }).catch(() => true) : true;
    if (!open) return { outcome: 'resolved' };
    const at = await locate(req.domainUuid).catch(() => undefined);
    if (at?.ok) {
      const thaw = await thawThere(req, at).catch(() => undefined);
      if (thaw && !thaw.domainGone && !thaw.skippedForLocalFreeze) return { outcome: 'thawed', host: at.host, thaw };
    } else if (at && (at.why === 'not-found' || at.why === 'not-running')) {
      const nowhere = await fleetOps()
        .obligationRunningNowhere({ domainUuid: req.domainUuid, ...(req.freezeId ? { freezeId: req.freezeId } : {}), disks: req.disks ?? [] })
        .catch(() => false);
      if (nowhere) return { outcome: 'nowhere', message: at.message };
    }
    await sleep(Math.min(1000 * 2 ** Math.min(looks, 4), 15_000));
  }
  return continueAsNew<typeof handOffFreeze>({ ...req, looks });
}

/** The SDK's answer when the polling worker has no such activity (a release from before it). */
const NOT_REGISTERED = 'NotFoundError';

async function thawThere(req: HandOffRequest, at: { host: string; taskQueue: string }): Promise<ThawResult> {
  const summary = { summary: `thaw ${req.domainName} on ${at.host} (frozen on ${req.fromHost})` };
  const arrived = {
    domainUuid: req.domainUuid,
    domainName: req.domainName,
    agentTimeoutSec: req.agentTimeoutSec,
    ...(req.owner ? { owner: req.owner } : {}),
    ...(req.freezeId ? { freezeId: req.freezeId } : {}),
  };
  try {
    return await handOffThawOn(at.taskQueue, req.agentTimeoutSec).thawArrivedGuest.executeWithOptions(summary, [arrived]);
  } catch (err) {
    if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === NOT_REGISTERED) {
      return handOffThawOn(at.taskQueue, req.agentTimeoutSec).thawGuest.executeWithOptions(summary, [{ ...arrived, thawedBy: 'handoff' }]);
    }
    throw err;
  }
}
