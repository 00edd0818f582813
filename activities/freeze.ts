import { ApplicationFailure } from '@temporalio/common';
import { isFrozenState, readAgentResponseTimeout } from '../src/libvirt';
import type { DomainRef, LibvirtClient } from '../src/libvirt';
import { monoMs, nowMs } from '../src/host/clock';
import { faultPoint } from '../src/host/fault-points';
import { restoreAgentTimeout } from '../src/safety/agent-timeout-restore';
import { thawAndConfirm } from '../src/safety/thaw-confirm';
import { FailureType, FREEZE_NOT_SENT } from '../src/model/failures';
import type { FreezeRequest, FreezeResult } from '../src/model/types';
import type { PreFlushResult } from '../src/model/pre-flush';
import { dueAt } from '../src/model/freeze-obligation';
import { arrivalsVia, honourArrivals } from '../src/safety/arrivals';
import type { ActivityDeps } from './deps';
import { activityTimeLeft, preFlushBeforeFreeze } from './pre-flush';
import { isCancellation, StepError } from './step-error';

/**
 * virDomainFSFreeze, guarded and owned. vmsnap freezes only a thawed guest: one already frozen
 * belongs to someone else (an operator, another tool) and is left alone — nothing armed, nothing
 * thawed. The host guard is armed (journal + watchdog) before the call: a freeze that fails with
 * "agent unresponsive" may still land in the guest later, and then the watchdog is what thaws it
 * if everything else is gone.
 */
export function freezeGuest(deps: ActivityDeps) {
  return async function freezeGuest(req: FreezeRequest): Promise<FreezeResult> {
    const enteredMono = monoMs();
    const timeLeft = activityTimeLeft(enteredMono);
    const lv = await deps.libvirt();
    const { dom, previousAgentTimeout, freezeId, preFlush } = await beforeTheCall(deps, lv, req, timeLeft);
    const startedAt = nowMs();
    const startedMono = monoMs();
    deps.metrics.freezeCallStarted(freezeId, startedAt);
    try {
      const frozenFilesystems = await lv.fsFreeze(dom, undefined, { timeoutMs: req.agentTimeoutSec * 1000 + 2000 });
      const returnedAt = nowMs();
      const returnedMono = monoMs();
      await faultPoint('freeze:after');
      const preparedMs = startedMono - enteredMono;
      return { frozenFilesystems, startedAt, returnedAt, startedMono, returnedMono, preparedMs, ...(freezeId ? { freezeId } : {}), ...(preFlush ? { preFlush } : {}) };
    } catch (err) {
      deps.metrics.failures.inc({ step: 'freeze' });
      if (isFrozenState(err)) {
        // Somebody froze the guest between our status check and our call: theirs, not ours.
        // Stand the guard down WITHOUT thawing, and put the agent timeout back. No window of ours.
        await deps.guard.release(req.domainUuid);
        await deps.guard.clear(req.domainUuid);
        deps.metrics.freezeWindowLeft(freezeId);
        const warning = await restoreAgentTimeout(lv, { domainUuid: req.domainUuid, previousAgentTimeout });
        if (warning) deps.log.warn(warning, { domain: req.domainName });
        throw frozenByOther(req.domainName, 'its agent refused our freeze: already frozen');
      }
      // Outcome unknown or refused: the guard stays armed; the workflow's compensation thaws and
      // watches for a freeze that lands late.
      throw new StepError(`freeze ${req.domainName}`, err, {
        type: FailureType.FreezeFailed,
        nonRetryable: true,
        keep: [FailureType.QuiesceUnavailable],
      });
    }
  };
}

/**
 * Everything up to virDomainFSFreeze: the status check, the pre-flush, the agent timeout, the
 * guard. The pre-flush comes after the status check (never into somebody else's freeze) and before
 * the guard is armed, so it spends none of the freeze's deadline. A failure
 * here leaves no freeze of ours in the guest, so it is undone here without a thaw (the guard stood
 * down, the agent timeout put back) and reaches the workflow marked FREEZE_NOT_SENT: no thaw, no
 * late-freeze watch, no hand-off — a thaw then could only end somebody else's freeze.
 */
async function beforeTheCall(
  deps: ActivityDeps,
  lv: LibvirtClient,
  req: FreezeRequest,
  timeLeft: () => number | undefined,
): Promise<{ dom: DomainRef; previousAgentTimeout: number | undefined; freezeId: string | undefined; preFlush: PreFlushResult | undefined }> {
  let timeoutSet: { previousAgentTimeout: number | undefined } | undefined;
  let armed = false;
  try {
    const dom = await lv.lookupDomainByUuid(req.domainUuid);
    await standDownIfFrozen(deps, lv, dom, req);
    const preFlush = await preFlushBeforeFreeze(deps, lv, dom, req, timeLeft());
    const previousAgentTimeout = await readAgentResponseTimeout(deps.libvirtStatusDir, dom.name);
    await lv.setAgentResponseTimeout(dom, req.agentTimeoutSec);
    timeoutSet = { previousAgentTimeout };
    armed = true; // an arm that fails half-way may have journaled or spawned: stand it down too
    const entry = await deps.guard.arm({
      domainUuid: req.domainUuid,
      domainName: req.domainName,
      owner: req.owner,
      deadlineMs: req.deadlineMs,
      agentTimeoutSec: req.agentTimeoutSec,
      ...(previousAgentTimeout !== undefined ? { previousAgentTimeout } : {}),
      ...(req.disks ? { disks: req.disks } : {}),
    });
    await faultPoint('freeze:before-call');
    return { dom, previousAgentTimeout, freezeId: entry.freezeId, preFlush };
  } catch (err) {
    if (isCancellation(err)) throw err;
    if (armed) await standDownUnfrozen(deps, req);
    if (timeoutSet) {
      const warning = await restoreAgentTimeout(lv, { domainUuid: req.domainUuid, previousAgentTimeout: timeoutSet.previousAgentTimeout }).catch((e: unknown) => String(e));
      if (warning) deps.log.warn(warning, { domain: req.domainName });
    }
    throw new StepError(`prepare freeze of ${req.domainName}`, err, undefined, FREEZE_NOT_SENT);
  }
}

/** Guard off without a thaw: journal entry and watchdog gone (each tried, whatever the other did). */
async function standDownUnfrozen(deps: ActivityDeps, req: FreezeRequest): Promise<void> {
  for (const step of [() => deps.guard.release(req.domainUuid), () => deps.guard.clear(req.domainUuid)]) {
    await step().catch((e: unknown) => deps.log.warn('could not stand the freeze guard down after a failure before the freeze', { domain: req.domainName, error: String(e) }));
  }
}

/**
 * A frozen guest before our freeze is either a late freeze of an earlier vmsnap run that this
 * host still watches (ours: thaw it and go on) or somebody else's (fail, touch nothing).
 */
async function standDownIfFrozen(deps: ActivityDeps, lv: LibvirtClient, dom: DomainRef, req: FreezeRequest): Promise<void> {
  if ((await lv.fsFreezeStatus(dom, req.agentTimeoutSec)) !== 'frozen') return;
  const journaled = await deps.guard.read(req.domainUuid);
  if (journaled?.mode === 'watch') {
    await thawAndConfirm(lv, req.domainUuid, req.agentTimeoutSec);
    deps.metrics.thaws.inc({ layer: 'guard' });
    deps.log.warn('thawed a late freeze of an earlier run before freezing', { domain: req.domainName, owner: journaled.owner });
    return;
  }
  if (journaled) {
    throw ApplicationFailure.retryable(`${req.domainName} is frozen by another vmsnap run (${journaled.owner})`, FailureType.DomainBusy);
  }
  // Frozen by vmsnap on another host and carried here by a migration: past its deadline it is owed
  // a thaw, honoured now by the one arrivals mechanism; before it, that run's window may be open.
  const pass = await honourArrivals(arrivalsVia(async () => lv, deps.guard, deps.metrics, deps.log, deps.clockSkewMs ?? 1000), req.domainUuid);
  if (pass.honoured.length) return;
  const open = pass.waiting[0];
  if (open) {
    throw ApplicationFailure.retryable(
      `${req.domainName} is frozen by vmsnap run ${open.owner} (frozen on ${open.host}) until ${new Date(dueAt(open, deps.clockSkewMs ?? 1000)).toISOString()}`,
      FailureType.DomainBusy,
    );
  }
  throw frozenByOther(req.domainName, 'guest-fsfreeze-status says frozen and no vmsnap host has a record of freezing it');
}

export function frozenByOther(domain: string, why: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `${domain} is already frozen by someone else (${why}); vmsnap leaves a freeze it did not make untouched — ` +
      'nothing was armed, created or thawed',
    FailureType.GuestFrozenByOther,
  );
}
