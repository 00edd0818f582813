import { ApplicationFailure } from '@temporalio/common';
import { isFrozenState, readAgentResponseTimeout } from '../src/libvirt';
import type { DomainRef, LibvirtClient } from '../src/libvirt';
import { monoMs, nowMs } from '../src/host/clock';
import { faultPoint } from '../src/host/fault-points';
import { M } from '../src/host/metrics';
import { restoreAgentTimeout } from '../src/host/agent-timeout-restore';
import { thawAndConfirm } from '../src/host/thaw-confirm';
import { FailureType } from '../src/model/failures';
import type { FreezeRequest, FreezeResult } from '../src/model/types';
import { judgeArrival } from '../src/model/freeze-obligation';
import type { ActivityDeps } from './deps';
import { during, StepError } from './step-error';

/**
 * virDomainFSFreeze, guarded and owned. vmsnap freezes only a thawed guest: one already frozen
 * belongs to someone else (an operator, another tool) and is left alone — nothing armed, nothing
 * thawed. The host guard is armed (journal + watchdog) before the call: a freeze that fails with
 * "agent unresponsive" may still land in the guest later, and then the watchdog is what thaws it
 * if everything else is gone.
 */
export function freezeGuest(deps: ActivityDeps) {
  return async function freezeGuest(req: FreezeRequest): Promise<FreezeResult> {
    const lv = await deps.libvirt();
    const { dom, previousAgentTimeout } = await during(`prepare freeze of ${req.domainName}`, async () => {
      const dom = await lv.lookupDomainByUuid(req.domainUuid);
      await standDownIfFrozen(deps, lv, dom, req);
      const previousAgentTimeout = await readAgentResponseTimeout(deps.libvirtStatusDir, dom.name);
      await lv.setAgentResponseTimeout(dom, req.agentTimeoutSec);
      return { dom, previousAgentTimeout };
    });
    const armed = await deps.guard.arm({
      domainUuid: req.domainUuid,
      domainName: req.domainName,
      owner: req.owner,
      deadlineMs: req.deadlineMs,
      agentTimeoutSec: req.agentTimeoutSec,
      ...(previousAgentTimeout !== undefined ? { previousAgentTimeout } : {}),
      ...(req.disks ? { disks: req.disks } : {}),
    });
    const freezeId = armed.freezeId;
    deps.metrics.add(M.frozenGuests, 1);
    await faultPoint('freeze:before-call');
    const startedAt = nowMs();
    const startedMono = monoMs();
    try {
      const frozenFilesystems = await lv.fsFreeze(dom, undefined, { timeoutMs: req.agentTimeoutSec * 1000 + 2000 });
      const returnedAt = nowMs();
      const returnedMono = monoMs();
      await faultPoint('freeze:after');
      return { frozenFilesystems, startedAt, returnedAt, startedMono, returnedMono, ...(freezeId ? { freezeId } : {}) };
    } catch (err) {
      deps.metrics.inc(M.failures, { step: 'freeze' });
      if (isFrozenState(err)) {
        // Somebody froze the guest between our status check and our call: theirs, not ours.
        // Stand the guard down WITHOUT thawing, and put the agent timeout back.
        await deps.guard.release(req.domainUuid);
        await deps.guard.clear(req.domainUuid);
        deps.metrics.add(M.frozenGuests, -1);
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
 * A frozen guest before our freeze is either a late freeze of an earlier vmsnap run that this
 * host still watches (ours: thaw it and go on) or somebody else's (fail, touch nothing).
 */
async function standDownIfFrozen(deps: ActivityDeps, lv: LibvirtClient, dom: DomainRef, req: FreezeRequest): Promise<void> {
  if ((await lv.fsFreezeStatus(dom, req.agentTimeoutSec)) !== 'frozen') return;
  const journaled = await deps.guard.read(req.domainUuid);
  if (journaled?.mode === 'watch') {
    await thawAndConfirm(lv, req.domainUuid, req.agentTimeoutSec);
    deps.metrics.inc(M.thaws, { layer: 'guard' });
    deps.log.warn('thawed a late freeze of an earlier run before freezing', { domain: req.domainName, owner: journaled.owner });
    return;
  }
  if (journaled) {
    throw ApplicationFailure.retryable(`${req.domainName} is frozen by another vmsnap run (${journaled.owner})`, FailureType.DomainBusy);
  }
  // Frozen by vmsnap on another host and carried here by a migration: past its deadline it is owed
  // a thaw (honoured now, as arrivals would); before it, that run's window may still be open.
  const open = await deps.guard.obligationOf(req.domainUuid);
  if (open) {
    const verdict = judgeArrival(open, Date.now(), deps.clockSkewMs ?? 1000);
    if (verdict.act === 'wait') {
      throw ApplicationFailure.retryable(`${req.domainName} is frozen by vmsnap run ${open.owner} (frozen on ${open.host}) until ${new Date(verdict.untilMs).toISOString()}`, FailureType.DomainBusy);
    }
    await thawAndConfirm(lv, req.domainUuid, open.agentTimeoutSec);
    await deps.guard.resolve(req.domainUuid, open.freezeId);
    deps.metrics.inc(M.thaws, { layer: 'arrival' });
    deps.log.warn('thawed an overdue freeze vmsnap made on another host before freezing', { domain: req.domainName, owner: open.owner, frozenOn: open.host });
    return;
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
