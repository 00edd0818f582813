import { ApplicationFailure, ChildWorkflowFailure } from '@temporalio/common';
import { CancellationScope, ParentClosePolicy, isCancellation, patched, sleep, startChild, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { FLEET_TASK_QUEUE, LOST_AFTER_INTERVALS, MAX_RELOCATIONS, hostWatchMs } from '../src/model/fleet';
import type { Placement, Relocation } from '../src/model/fleet';
import type { SnapshotInput, SnapshotRequest } from '../src/model/input';
import { SA } from '../src/model/search-attributes';
import type { SnapshotResult } from '../src/model/types';
import { failureType, messageOf } from './failure-of';
import { unwrapChild } from './child-failure';
import { fleetOps } from './activity-profiles';
import { locate, lookUntilSure } from './locate';
import { Progress } from './progress';
import { handOffFreeze } from './hand-off';
import { verifyIfDue } from './verify-every';

/** The first check of a run's host still beating; then every LOST_AFTER_INTERVALS of its beats. */
const HOST_WATCH_MS = 30_000;

/**
 * A run started by VM name on the fleet queue. It locates the VM (every live host asked), then
 * hands the whole run to a child on that host's queue: the freeze window stays in one worker
 * beside the VM's libvirtd, exactly as for a run started on the host's queue. If the VM left that
 * host before anything was frozen or created (the child fails DomainNotFound/DomainNotRunning at
 * inspection, or DomainMoved at the freeze), it locates it again — at most MAX_RELOCATIONS times,
 * each move a failed child in the history. A host that stops beating fails the run HostLost
 * (retryable) after its child there is terminated.
 */
export async function routeSnapshot(input: SnapshotInput, request: SnapshotRequest): Promise<SnapshotResult> {
  const { workflowId } = workflowInfo();
  const progress = new Progress(input.domain);
  upsertSearchAttributes([{ key: SA.domain, value: input.domain }]);
  const moves: Relocation[] = [];
  for (let hop = 0; hop <= MAX_RELOCATIONS; hop++) {
    progress.phase('locate');
    // After a move the VM was running a moment ago: until its new host's entry names it, "not
    // found" or "shut off where it was" says only that the index is behind (a busy fleet queue,
    // a slow beat), so it is looked at for longer and never a verdict.
    const moved = hop > 0 && patched(FOLLOW_AFTER_MOVE);
    const behind = (p: Placement) => moved && !p.ok && (p.why === 'not-found' || p.why === 'not-running');
    // A definite "not there" fails at once; an unsure placement is looked at again for a while.
    const at = await lookUntilSure(
      () => locate(input.domain, { relook: true }),
      (p) => (!p.ok && (p.why === 'unanswered' || p.why === 'ambiguous' || p.why === 'no-hosts')) || behind(p),
      moved ? MOVED_LOOK_RETRIES : undefined,
    );
    if (!at.ok) {
      if (behind(at)) throw ApplicationFailure.retryable(`${input.domain} left ${moves.at(-1)!.from} and is not yet found running anywhere: ${at.message}`, FailureType.DomainNotPlaced);
      if (at.why === 'not-found') throw ApplicationFailure.nonRetryable(at.message, FailureType.DomainNotFound);
      if (at.why === 'not-running') throw ApplicationFailure.nonRetryable(at.message, FailureType.DomainNotRunning);
      throw ApplicationFailure.retryable(at.message, FailureType.DomainNotPlaced);
    }
    upsertSearchAttributes([{ key: SA.host, value: at.host }]);
    const childId = `${workflowId}.on.${at.host}${hop ? `.${hop}` : ''}`;
    progress.delegate(at.host, childId);
    const child = await startChild('consistentSnapshot', {
      taskQueue: at.taskQueue,
      workflowId: childId,
      args: [{ ...request, routedBy: workflowId }],
    });
    try {
      const copied = (await raceHostLoss(child.result() as Promise<SnapshotResult>, at.host, childId, at.uuid)) as SnapshotResult;
      const result = await verifyIfDue(input, moves.length ? { ...copied, relocations: moves } : copied, progress);
      progress.phase('done');
      upsertSearchAttributes([
        { key: SA.quiesced, value: result.quiesced },
        { key: SA.result, value: 'succeeded' },
      ]);
      return result;
    } catch (err) {
      const type = failureType(err);
      const movedAway = type === FailureType.DomainNotFound || type === FailureType.DomainNotRunning || type === FailureType.DomainMoved;
      if (err instanceof ChildWorkflowFailure && movedAway && !isCancellation(err)) {
        moves.push({ from: at.host, reason: messageOf(err) });
        continue;
      }
      progress.phase('failed');
      upsertSearchAttributes([{ key: SA.result, value: 'failed' }]);
      throw unwrapChild(err);
    }
  }
  throw ApplicationFailure.retryable(
    `${input.domain} moved ${moves.length} times during this run (${moves.map((m) => m.from).join(' → ')}); giving up for now`,
    FailureType.DomainKeepsMoving,
  );
}

/**
 * Histories from before a relocation treated "not found" as the index being behind (it failed
 * DomainNotFound at once; a storm of 300 runs over 30 hosts, 58 moving, lost 9 runs so). Retire
 * 2027-06-01, with FLEET_INDEX.
 */
const FOLLOW_AFTER_MOVE = 'vmsnap-follow-after-move';

/** Looks after a move (2 s apart, each with its own 2 s relook): about 40 s for the new host's entry to name the VM. */
const MOVED_LOOK_RETRIES = 10;

/**
 * Histories from before a host was lost only on a long silence (it was lost after 3 missed beats,
 * or at once when missing from the registry). Retire with FREEZE_OBLIGATION in capture.ts.
 */
const LONG_SILENCE = 'vmsnap-host-lost-on-long-silence';

/**
 * The child's result, unless its host is lost first. The watch runs in its own scope, so it stops
 * with the child. Lost means a positive, long record of silence (isLost): a registry that cannot
 * be read, that does not know the host (new, or started over), or a host that drains for a restart
 * never ends a run — Temporal resumes it when the worker is back. A lost host's freeze of the
 * domain is handed over before its child is terminated, and the run fails HostLost, retryable.
 */
async function raceHostLoss<T>(result: Promise<T>, host: string, childId: string, domainUuid: string): Promise<T> {
  const watch = new CancellationScope();
  let lostBecause: string | undefined;
  const longSilence = patched(LONG_SILENCE);
  const lost = watch.run(async () => {
    for (let every = longSilence ? hostWatchMs(undefined) : HOST_WATCH_MS; ; ) {
      await sleep(every);
      if (longSilence) {
        const h = await watchHost(host);
        if (!h) continue;
        every = hostWatchMs(h);
        if (!h.lost) continue;
        const reason = `host ${host} has been silent since ${new Date(h.seenAt).toISOString()}${h.drainingSince !== undefined ? ' (it said it was stopping)' : ''}: lost`;
        lostBecause = reason;
        await handOverFreeze(domainUuid, host);
        await fleetOps().terminateLostRun.executeWithOptions({ summary: `terminate ${childId}: ${host} lost` }, [{ workflowId: childId, reason }]);
        throw ApplicationFailure.retryable(reason, FailureType.HostLost);
      }
      const h = (await fleetOps().fleetHosts()).find((x) => x.host === host);
      if (!h?.alive) {
        const reason = `host ${host} stopped announcing itself (last seen ${h ? new Date(h.seenAt).toISOString() : 'never'})`;
        lostBecause = reason;
        await fleetOps().terminateLostRun.executeWithOptions({ summary: `terminate ${childId}: ${host} lost` }, [{ workflowId: childId, reason }]);
        throw ApplicationFailure.retryable(reason, FailureType.HostLost);
      }
      // Then as often as the host can be declared lost: sooner is not possible, later is waste.
      every = Math.max(3000, Math.min(HOST_WATCH_MS, LOST_AFTER_INTERVALS * h.intervalMs));
    }
  });
  lost.catch(() => undefined); // cancelled when the child ends first
  try {
    return await Promise.race([result, lost as Promise<never>]);
  } catch (err) {
    // The child's "terminated" may arrive before the watch's own failure: same cause either way.
    if (lostBecause) throw ApplicationFailure.retryable(lostBecause, FailureType.HostLost);
    throw err;
  } finally {
    watch.cancel();
  }
}

/**
 * The run's host as the fleet sees it, or undefined when unreadable or unknown. One host's entry
 * (a constant-size record in the history); histories from before the index read the whole fleet.
 */
async function watchHost(host: string) {
  if (patched(FLEET_INDEX_WATCH)) return (await fleetOps().fleetHost({ host }).catch(() => null)) ?? undefined;
  return (await fleetOps().fleetHosts().catch(() => undefined))?.find((x) => x.host === host);
}

/** Routers from before the fleet index watched the whole fleet map. Retire 2027-06-01. */
const FLEET_INDEX_WATCH = 'vmsnap-fleet-index';

/**
 * A lost host may have left the guest frozen (its run's window, or a freeze that travelled): the
 * open obligation gets its hand-off, which outlives this run, before the run there is ended.
 */
async function handOverFreeze(domainUuid: string, host: string): Promise<void> {
  const open = await fleetOps().freezeObligationOf({ domainUuid }).catch(() => null);
  if (!open) return;
  try {
    await startChild(handOffFreeze, {
      taskQueue: FLEET_TASK_QUEUE,
      workflowId: `vmsnap-handoff-${open.freezeId}`,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [{ domainUuid, domainName: open.domainName, agentTimeoutSec: open.agentTimeoutSec, fromHost: host, owner: open.owner, freezeId: open.freezeId, disks: open.disks }],
    });
  } catch {
    // Already started (by the run itself or a sweeper): it holds the freeze already.
  }
}
