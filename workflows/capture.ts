import { ApplicationFailure } from '@temporalio/common';
import { ParentClosePolicy, WorkflowIdReusePolicy, condition, deprecatePatch, executeChild, isCancellation, log, patched, startChild, uuid4, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import { failureType, freezeNotSent, messageOf } from './failure-of';
import type { SnapshotInput } from '../src/model/input';
import { judgeFreeze } from '../src/model/quiesce-truth';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import type { Capture } from '../src/model/snapshot-result';
import type { FreezeResult, SnapshotDisksResult, SnapshotPlan, ThawResult } from '../src/model/types';
import { cleanup, freezeWindow, prepareLocal, thawEscalated, thawLocal } from './activity-profiles';
import type { Compensations } from './compensations';
import type { Progress } from './progress';
import type { RunContext } from './run-context';
import { thawWherever } from './thaw-wherever';
import { handOffFreeze } from './hand-off';
import type { HandOffResult } from './hand-off';

/**
 * freeze → snapshot every disk → thaw, with the thaw compensation registered before the freeze
 * is attempted and the snapshot cleanup registered before the snapshot.
 */
export async function captureDisks(ctx: RunContext, plan: SnapshotPlan, saga: Compensations): Promise<Capture> {
  const { input, progress } = ctx;
  // Snapshot names and owner records follow the run's name id (the router's, for a routed run);
  // the freeze's owner is this execution.
  const { nameId: workflowId, workflowId: ownId, runId } = ctx.id;
  const window = freezeWindow(input);
  const owner = `${ownId}/${runId}`;
  const dom: Dom = { domainUuid: plan.domain.uuid, domainName: plan.domain.name, agentTimeoutSec: input.agentTimeoutSec, owner };
  const disks = plan.disks.map((d) => ({ pool: d.source.pool, image: d.source.image, ...(d.source.namespace ? { namespace: d.source.namespace } : {}) }));
  let thawed = !plan.freeze;
  // Until the freeze call has answered, a freeze may still land in the guest: the thaw that
  // undoes it must also watch for a late one.
  let freezeAnswered = false;
  // Before the freeze is asked for, nothing of this run can be frozen in the guest: a failure
  // there (prepareSnapshots) must not thaw, let alone watch a minute for a late freeze.
  let freezeAsked = false;
  let snapshotTimedOut = false;

  if (plan.freeze) {
    saga.addUrgent('thaw', async () => {
      // (Deprecated patch, docs/versioning.md: before it, a failure ahead of the freeze thawed too.)
      if (!thawed && !freezeAsked) deprecatePatch(THAW_ONLY_AFTER_FREEZE_ASKED);
      if (!thawed && freezeAsked) {
        await thawUntilDone(input, dom, progress, freezeAnswered ? 0 : input.lateSnapshotWatchMs);
      }
      thawed = true;
    });
  }
  saga.add('remove source snapshots', async () => {
    await cleanupSnaps(plan, snapshotTimedOut ? input.lateSnapshotWatchMs : 0);
  });

  // A replayed or retried run may find snapshots its dead predecessor took under this run's
  // names; they are removed here, before the freeze, so the window holds only the new snapshot.
  await prepareLocal().prepareSnapshots.executeWithOptions({ summary: 'prepare snapshots' }, [
    { workflowId, snaps: plan.disks.map((d) => ({ source: d.source, snap: d.sourceSnap })), timeoutMs: input.snapshotTimeoutMs },
  ]);

  let freeze: FreezeResult | undefined;
  let reason = plan.noFreezeReason ?? '';
  if (plan.freeze) {
    progress.phase('freeze');
    freezeAsked = true;
    try {
      freeze = await window.freezeGuest.executeWithOptions({ summary: `freeze ${plan.domain.name}` }, [
        { ...dom, deadlineMs: input.freezeDeadlineMs, owner, disks },
      ]);
      freezeAnswered = true;
      if (freeze.freezeId) dom.freezeId = freeze.freezeId;
    } catch (err) {
      if (failureType(err) === FailureType.GuestFrozenByOther) {
        // Somebody else's freeze: nothing of ours to thaw, and theirs must stay.
        // (Deprecated patch, docs/versioning.md: no kept history predates it.)
        deprecatePatch('thaw-only-own-freezes');
        thawed = true;
        throw err;
      }
      if (isCancellation(err)) throw err;
      if (freezeNotSent(err) && patched(FREEZE_NOT_SENT_PATCH)) {
        // It failed before the freeze was sent: nothing of ours is in the guest, so no thaw, no
        // late-freeze watch and no hand-off (each could end a freeze somebody else made).
        thawed = true;
        const type = failureType(err);
        if (type === FailureType.DomainNotFound || type === FailureType.DomainNotRunning) {
          throw ApplicationFailure.nonRetryable(`${plan.domain.name} left this host before it was frozen: ${messageOf(err)}`, FailureType.DomainMoved);
        }
        if (type === FailureType.DomainBusy) throw err; // another vmsnap run's freeze: it stays theirs
        if (input.quiesce === 'require') throw asQuiesceFailure(err);
      } else {
        deprecatePatch(FOLLOWS_MIGRATION);
        // Whatever the policy, a freeze that landed late is undone first, where the guest runs now.
        const local = await thawUntilDone(input, dom, progress, input.lateSnapshotWatchMs);
        thawed = true;
        if (local.domainGone) {
          // The VM left this host (migrated, or stopped) while its freeze was asked for ("guest
          // agent disappeared", or not running): nothing was snapshotted; the run can go where it is.
          throw ApplicationFailure.nonRetryable(`${plan.domain.name} left this host before it was frozen: ${messageOf(err)}`, FailureType.DomainMoved);
        }
        if (input.quiesce === 'require') throw asQuiesceFailure(err);
      }
      // prefer: go on crash-consistent.
      reason = `freeze failed: ${messageOf(err)}`;
    }
    if (freeze && freeze.frozenFilesystems === 0) {
      await thawUntilDone(input, dom, progress, 0);
      thawed = true;
      if (input.quiesce === 'require') {
        throw ApplicationFailure.nonRetryable('quiesce required but the guest agent froze 0 filesystems', FailureType.QuiesceUnavailable);
      }
      reason = 'guest agent froze 0 filesystems';
      freeze = undefined;
    }
  }

  progress.phase('snapshot');
  let snapshot: SnapshotDisksResult;
  try {
    snapshot = await window.snapshotDisks.executeWithOptions({ summary: `snapshot ${plan.disks.length} disk(s)` }, [
      {
        snaps: plan.disks.map((d) => ({ target: d.target, source: d.source, snap: d.sourceSnap })),
        timeoutMs: input.snapshotTimeoutMs,
      },
    ]);
  } catch (err) {
    snapshotTimedOut = failureType(err) === FailureType.SnapshotTimeout;
    throw err;
  }

  let thaw: ThawResult | undefined;
  if (freeze && !thawed) {
    progress.phase('thaw');
    const { freezeId: _f, ...thawDom } = dom;
    thaw = await thawLocal(input, 3).thawGuest.executeWithOptions({ summary: `thaw ${plan.domain.name}` }, [
      { ...thawDom, thawedBy: 'workflow' },
    ]);
    thaw = await thawWhereItRuns(dom, thaw);
    thawed = true;
  }

  if (freeze && thaw) {
    const verdict = judgeFreeze(freeze, snapshot, thaw, input.freezeDeadlineMs);
    if (!verdict.quiesced) {
      if (input.quiesce === 'require') throw ApplicationFailure.nonRetryable(verdict.reason, verdict.failure);
      return { quiesced: false, quiesceReason: verdict.reason, frozenFilesystems: 0, freeze, snapshot, thaw };
    }
    return { quiesced: true, quiesceReason: verdict.reason, frozenFilesystems: freeze.frozenFilesystems, freeze, snapshot, thaw };
  }
  return { quiesced: false, quiesceReason: reason || 'not frozen', frozenFilesystems: 0, snapshot };
}

/** Local retries first; past them, escalate to a server-tracked activity that retries until done. */
interface Dom {
  domainUuid: string;
  domainName: string;
  agentTimeoutSec: number;
  owner: string;
  /** Set once the freeze answered: its obligation, which a hand-off resolves. */
  freezeId?: string;
}

async function thawUntilDone(
  input: SnapshotInput,
  dom: Dom,
  progress: Progress,
  lateFreezeWatchMs: number,
): Promise<ThawResult> {
  const { freezeId: _f, ...thawDom } = dom;
  const req = { ...thawDom, thawedBy: 'compensation' as const, ...(lateFreezeWatchMs ? { lateFreezeWatchMs } : {}) };
  let thaw: ThawResult;
  try {
    thaw = await thawLocal(input, 5).thawGuest.executeWithOptions({ summary: `thaw ${dom.domainName} (compensation)` }, [req]);
  } catch (err) {
    log.error('thaw failed after local retries; escalating', { domain: dom.domainName, error: messageOf(err) });
    progress.phase('thaw-escalated');
    thaw = await thawEscalated(input).thawGuest.executeWithOptions({ summary: `thaw ${dom.domainName} (escalated)` }, [req]);
  }
  await thawWhereItRuns(dom, thaw);
  return thaw;
}

const FOLLOWS_MIGRATION = 'vmsnap-thaw-follows-migration';
/** Histories from before a failure ahead of the freeze call was told apart from a failed freeze. */
const FREEZE_NOT_SENT_PATCH = 'vmsnap-freeze-not-sent';
/** Histories from before it thawed (and watched 60 s) after a failure ahead of the freeze. */
const THAW_ONLY_AFTER_FREEZE_ASKED = 'vmsnap-thaw-only-after-freeze-asked';
/**
 * Histories from before a freeze was an obligation (thawWherever, which gave up after 30 s).
 * Retire when no run begun before 2026-12-02 is open (runs end within their own timeouts; the
 * replay set keeps one such history): then the else branch and thawWherever go.
 */
const FREEZE_OBLIGATION = 'vmsnap-freeze-obligation';
/** How long the run waits for its hand-off before it reports the thaw as pending (the hand-off goes on). */
const HANDOFF_WAIT_MS = 120_000;

/**
 * This host says the domain is gone: it may run frozen on another host (a live migration carries
 * the freeze along). The freeze's hand-off — a workflow of its own that outlives this run and never
 * gives up — thaws it where it runs; this host's part ends. The run reports what it knows when it
 * stops waiting: thawed there (and when), ended there by the destination's own layers, or pending.
 */
async function thawWhereItRuns(dom: Dom, thaw: ThawResult): Promise<ThawResult> {
  if (!thaw.domainGone) return thaw;
  deprecatePatch(FOLLOWS_MIGRATION);
  const { workflowId, taskQueue } = workflowInfo();
  if (!patched(FREEZE_OBLIGATION)) {
    const moved = await executeChild(thawWherever, {
      taskQueue: FLEET_TASK_QUEUE,
      workflowId: `${workflowId}.handoff.${uuid4()}`,
      args: [{ domainUuid: dom.domainUuid, domainName: dom.domainName, agentTimeoutSec: dom.agentTimeoutSec, fromHost: taskQueue, owner: dom.owner }],
    });
    await prepareLocal().forgetFreeze.executeWithOptions({ summary: `forget ${dom.domainName}'s freeze on this host` }, [{ domainUuid: dom.domainUuid, owner: dom.owner }]);
    if (moved.outcome !== 'thawed') return thaw;
    const { startedMono: _s, returnedMono: _r, ...wall } = moved.thaw;
    return { ...wall, thawedOn: moved.host };
  }
  const handOffId = `vmsnap-handoff-${dom.freezeId ?? `${workflowId}.${uuid4()}`}`;
  const child = await startChild(handOffFreeze, {
    taskQueue: FLEET_TASK_QUEUE,
    workflowId: handOffId,
    parentClosePolicy: ParentClosePolicy.ABANDON,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    args: [{ domainUuid: dom.domainUuid, domainName: dom.domainName, agentTimeoutSec: dom.agentTimeoutSec, fromHost: taskQueue, owner: dom.owner, ...(dom.freezeId ? { freezeId: dom.freezeId } : {}) }],
  });
  await prepareLocal().forgetFreeze.executeWithOptions({ summary: `hand ${dom.domainName}'s freeze over to ${handOffId}` }, [{ domainUuid: dom.domainUuid, owner: dom.owner }]);
  let moved: HandOffResult | undefined;
  void child.result().then((r) => (moved = r), () => undefined);
  await condition(() => moved !== undefined, HANDOFF_WAIT_MS);
  if (!moved) {
    log.warn('guest migrated while frozen; its thaw there is not proven yet, the hand-off goes on', { domain: dom.domainName, handOff: handOffId });
    return { ...thaw, handOff: { outcome: 'pending', workflowId: handOffId } };
  }
  if (moved.outcome !== 'thawed') return { ...thaw, handOff: { outcome: moved.outcome, workflowId: handOffId, ...(moved.outcome === 'nowhere' ? { message: moved.message } : {}) } };
  log.warn('guest migrated while frozen; thawed where it runs now', { domain: dom.domainName, host: moved.host });
  const { startedMono: _s, returnedMono: _r, ...wall } = moved.thaw;
  return { ...wall, thawedOn: moved.host };
}

async function cleanupSnaps(plan: SnapshotPlan, watchLateMs: number): Promise<void> {
  await cleanup().removeSourceSnaps.executeWithOptions({ summary: 'remove temporary snapshots' }, [
    {
      snaps: plan.disks.map((d) => ({ source: d.source, snap: d.sourceSnap })),
      watchLateMs,
    },
  ]);
}

function asQuiesceFailure(err: unknown): ApplicationFailure {
  const type = failureType(err);
  if (type === FailureType.QuiesceUnavailable) {
    return ApplicationFailure.nonRetryable(`quiesce required but ${messageOf(err)}`, FailureType.QuiesceUnavailable);
  }
  return ApplicationFailure.nonRetryable(`quiesce required but the freeze failed: ${messageOf(err)}`, FailureType.FreezeFailed);
}
