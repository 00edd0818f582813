import { ApplicationFailure } from '@temporalio/common';
import { deprecatePatch, isCancellation, log, patched } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import type { SnapshotPlan, FreezeResult, ThawResult } from '../src/model/types';
import { failureType, freezeNotSent, messageOf } from './failure-of';
import { THAW_ATTEMPTS, freezeWindow, thawEscalated, thawLocal } from './activity-profiles';
import type { RunContext } from './run-context';
import { FOLLOWS_MIGRATION, thawWhereItRuns } from './thaw-where-it-runs';
import type { FrozenDomain } from './thaw-where-it-runs';

/**
 * Where a run's freeze stands, as far as what may be in the guest goes:
 * - `not-asked`: the freeze has not been asked for; nothing of this run can be frozen.
 * - `asked`: the call is out and has not answered: a freeze may land in the guest late, so a thaw
 *   must also watch for it.
 * - `answered`: the guest said how many filesystems it froze; the thaw needs no watch.
 * - `closed`: nothing of this run is frozen: thawed (and proven), never sent, or the freeze was
 *   someone else's and stays theirs.
 */
type WindowState = 'not-asked' | 'asked' | 'answered' | 'closed';

/**
 * One run's freeze window and every thaw that can end it. The state is the one fact each thaw
 * decision reads — the compensation, a failed freeze, a freeze of nothing, the thaw after the
 * snapshot — and every thaw goes through {@link FreezeWindow.thaw}.
 */
export class FreezeWindow {
  private state: WindowState;
  /** Why the run is not quiesced, when it is not. */
  reason: string;
  private readonly dom: FrozenDomain;

  constructor(
    private readonly ctx: RunContext,
    private readonly plan: SnapshotPlan,
  ) {
    const { workflowId, runId } = ctx.id;
    this.state = plan.freeze ? 'not-asked' : 'closed';
    this.reason = plan.noFreezeReason ?? '';
    this.dom = { domainUuid: plan.domain.uuid, domainName: plan.domain.name, agentTimeoutSec: ctx.input.agentTimeoutSec, owner: `${workflowId}/${runId}` };
  }

  /** The compensation, registered before the freeze is asked for: ends whatever of ours may be frozen. */
  async undo(): Promise<void> {
    // (Deprecated patch, docs/versioning.md: before it, a failure ahead of the freeze thawed too.)
    if (this.state === 'not-asked') deprecatePatch(THAW_ONLY_AFTER_FREEZE_ASKED);
    if (this.state === 'asked' || this.state === 'answered') {
      await this.thaw('compensation', this.state === 'asked' ? this.ctx.input.lateSnapshotWatchMs : 0);
    }
    this.state = 'closed';
  }

  /**
   * Freeze the guest. A freeze that held is returned; `undefined` means the run goes on
   * crash-consistent (`quiesce: prefer`) with {@link reason} said; `require` fails instead.
   */
  async freeze(): Promise<FreezeResult | undefined> {
    const { input, progress } = this.ctx;
    progress.phase('freeze');
    this.state = 'asked';
    let freeze: FreezeResult;
    try {
      const disks = this.plan.disks.map((d) => ({ pool: d.source.pool, image: d.source.image, ...(d.source.namespace ? { namespace: d.source.namespace } : {}) }));
      freeze = await freezeWindow(input).freezeGuest.executeWithOptions({ summary: `freeze ${this.dom.domainName}` }, [
        { ...this.dom, deadlineMs: input.freezeDeadlineMs, disks },
      ]);
    } catch (err) {
      await this.freezeFailed(err);
      this.reason = `freeze failed: ${messageOf(err)}`;
      return undefined;
    }
    this.state = 'answered';
    if (freeze.freezeId) this.dom.freezeId = freeze.freezeId;
    if (freeze.frozenFilesystems > 0) return freeze;
    await this.thaw('compensation', 0);
    if (input.quiesce === 'require') {
      throw ApplicationFailure.nonRetryable('quiesce required but the guest agent froze 0 filesystems', FailureType.QuiesceUnavailable);
    }
    this.reason = 'guest agent froze 0 filesystems';
    return undefined;
  }

  /** The thaw after the snapshot, on the normal path; a failure here leaves it to the compensation. */
  async close(): Promise<ThawResult | undefined> {
    if (this.state !== 'answered') return undefined;
    this.ctx.progress.phase('thaw');
    return (await this.thaw('workflow', 0)).result;
  }

  /** Throws what the run fails with; returns when the run goes on crash-consistent. */
  private async freezeFailed(err: unknown): Promise<void> {
    const { input } = this.ctx;
    const type = failureType(err);
    if (type === FailureType.GuestFrozenByOther) {
      // Somebody else's freeze: nothing of ours to thaw, and theirs must stay.
      // (Deprecated patch, docs/versioning.md: no kept history predates it.)
      deprecatePatch('thaw-only-own-freezes');
      this.state = 'closed';
      throw err;
    }
    if (isCancellation(err)) throw err;
    if (freezeNotSent(err) && patched(FREEZE_NOT_SENT_PATCH)) {
      // It failed before the freeze was sent: nothing of ours is in the guest, so no thaw, no
      // late-freeze watch and no hand-off (each could end a freeze somebody else made).
      this.state = 'closed';
      if (type === FailureType.DomainNotFound || type === FailureType.DomainNotRunning) throw this.leftHost(err);
      if (type === FailureType.DomainBusy) throw err; // another vmsnap run's freeze: it stays theirs
    } else {
      deprecatePatch(FOLLOWS_MIGRATION);
      // Whatever the policy, a freeze that landed late is undone first, where the guest runs now.
      const { here } = await this.thaw('compensation', input.lateSnapshotWatchMs);
      // The VM left this host (migrated, or stopped) while its freeze was asked for ("guest agent
      // disappeared", or not running): nothing was snapshotted; the run can go where it is.
      if (here.domainGone) throw this.leftHost(err);
    }
    if (input.quiesce === 'require') throw asQuiesceFailure(err);
  }

  /**
   * The one thaw: the run's own (`workflow`: a few quick local retries; past them the
   * compensation takes over) or a compensating one (local retries, then a server-tracked activity
   * that never gives up); then, when this host says the domain is gone, its hand-off to wherever
   * it runs. `here` is this host's answer, `result` what the run reports.
   */
  private async thaw(by: 'workflow' | 'compensation', lateFreezeWatchMs: number): Promise<{ here: ThawResult; result: ThawResult }> {
    const { input, progress } = this.ctx;
    const { freezeId: _f, ...thawDom } = this.dom;
    const name = this.dom.domainName;
    let here: ThawResult;
    if (by === 'workflow') {
      here = await thawLocal(input, THAW_ATTEMPTS.afterSnapshot).thawGuest.executeWithOptions({ summary: `thaw ${name}` }, [{ ...thawDom, thawedBy: 'workflow' }]);
    } else {
      const req = { ...thawDom, thawedBy: 'compensation' as const, ...(lateFreezeWatchMs ? { lateFreezeWatchMs } : {}) };
      try {
        here = await thawLocal(input, THAW_ATTEMPTS.compensation).thawGuest.executeWithOptions({ summary: `thaw ${name} (compensation)` }, [req]);
      } catch (err) {
        log.error('thaw failed after local retries; escalating', { domain: name, error: messageOf(err) });
        progress.phase('thaw-escalated');
        here = await thawEscalated(input).thawGuest.executeWithOptions({ summary: `thaw ${name} (escalated)` }, [req]);
      }
    }
    const result = await thawWhereItRuns(this.dom, here);
    this.state = 'closed';
    return { here, result };
  }

  private leftHost(err: unknown): ApplicationFailure {
    return ApplicationFailure.nonRetryable(`${this.plan.domain.name} left this host before it was frozen: ${messageOf(err)}`, FailureType.DomainMoved);
  }
}

/** Histories from before a failure ahead of the freeze call was told apart from a failed freeze. */
const FREEZE_NOT_SENT_PATCH = 'vmsnap-freeze-not-sent';
/** Histories from before it thawed (and watched 60 s) after a failure ahead of the freeze. */
const THAW_ONLY_AFTER_FREEZE_ASKED = 'vmsnap-thaw-only-after-freeze-asked';

function asQuiesceFailure(err: unknown): ApplicationFailure {
  if (failureType(err) === FailureType.QuiesceUnavailable) {
    return ApplicationFailure.nonRetryable(`quiesce required but ${messageOf(err)}`, FailureType.QuiesceUnavailable);
  }
  return ApplicationFailure.nonRetryable(`quiesce required but the freeze failed: ${messageOf(err)}`, FailureType.FreezeFailed);
}
