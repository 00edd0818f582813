import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import {
  CancellationScope,
  ParentClosePolicy,
  condition,
  defineSignal,
  deprecatePatch,
  getExternalWorkflowHandle,
  log,
  patched,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { ChildWorkflowHandle } from '@temporalio/workflow';
import { FailureType } from '../src/model/failures';
import type { LimitRequest } from '../src/model/limits';
import { lockWorkflowId } from '../src/model/naming';
import { limitRequestSignal, tell } from './fleet-limit';
import type { LimitAnswer } from './fleet-limit';
import { answerHolderProbes, stillRuns } from './holder';
import { takeSoleTurn } from './limits';

export const releaseLock = defineSignal('release');
/** Release only if held for this workflow id: a run replaced by Reset can no longer release its lock itself. */
export const releaseLockFor = defineSignal<[{ workflowId: string }]>('release-for');
/**
 * A contender's request: check that the holder run still runs, and release if it does not. A run
 * replaced by Reset is closed, yet its lock and slots go on (Reset does not end them); when the
 * new run fails before it takes them back, nobody else would ever release them.
 */
export const checkHolder = defineSignal('check-holder');

/**
 * Holds a domain for one snapshot run or in-place restore. A child workflow with an id derived from the domain UUID:
 * Temporal allows one running execution per id, so a second run for the same VM is refused at
 * start (two same-name `rbd snap create` calls would both "succeed" on Ceph 16, so EEXIST cannot
 * be the lock). It dies with its parent (ParentClosePolicy TERMINATE), so a terminated run never
 * leaves the domain locked.
 */
export async function domainLock(holder: { workflowId: string; runId: string }): Promise<void> {
  let released = false;
  setHandler(releaseLock, () => {
    released = true;
  });
  setHandler(releaseLockFor, ({ workflowId }) => {
    if (workflowId === holder.workflowId) released = true;
  });
  let checks = 0;
  setHandler(checkHolder, () => {
    checks++;
  });
  // Since vmsnap-one-mutex the lock is a limit of the same workflow id (fleet-limit.ts), whose
  // runs ask by a limit request; while one of these is running they are told here.
  const asks: LimitRequest[] = [];
  setHandler(limitRequestSignal, (r) => {
    asks.push(r);
  });
  while (!released) {
    await condition(() => released || checks > 0 || asks.length > 0);
    if (released) break;
    checks = 0;
    const asked = asks.splice(0);
    // Fenced by run id: only the very run that took the lock keeps it, and a closed run can act
    // no more. A request of the holder's own workflow id comes from the run a Reset made.
    if (asked.some((a) => a.workflowId === holder.workflowId) || !(await stillRuns(holder))) {
      log.warn('lock holder run is closed; releasing', { holder: `${holder.workflowId}/${holder.runId}` });
      released = true;
    }
    await answerAll(asked, released ? 'ended' : 'refused');
  }
  await answerAll(asks, 'ended');
}

/** `ended`: this lock let go, ask again (the limit of the same id starts then). */
async function answerAll(asked: LimitRequest[], answer: LimitAnswer): Promise<void> {
  for (const a of asked) await tell(a, answer);
}

/**
 * A taken lock or slot: ask it to check its holder, then try again for a few seconds. Only a
 * holder run that is closed lets go, so a live run is never dispossessed.
 */
export async function startAfterHolderCheck<T>(id: string, start: () => Promise<T>, busy: unknown): Promise<T> {
  await getExternalWorkflowHandle(id).signal(checkHolder).catch(() => undefined);
  for (let i = 0; i < 6; i++) {
    await sleep(500);
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  throw busy;
}

export interface HeldLock {
  release(): Promise<void>;
}

/**
 * The domain lock: a limit of one without a queue (workflows/limits.ts `takeSoleTurn`), the same
 * primitive as the fleet limits, with their one Reset takeover and fencing rule. Refused at once
 * while a live run holds it: DomainBusy. Histories from before took a `domainLock` child here
 * (the legacy branch; it goes when 2026-12-06 leaves the support window, docs/versioning.md).
 */
export async function acquireDomainLock(domain: { name: string; uuid: string }, holder: { workflowId: string; runId: string }): Promise<HeldLock> {
  const lockId = lockWorkflowId(domain.uuid);
  if (patched(ONE_MUTEX)) {
    const turn = await takeSoleTurn(lockId, `lock on ${domain.name}, taken by ${holder.workflowId}`, LOCK_LEASE_MS);
    if (turn === 'busy') throw domainBusy(domain.name, lockId);
    return turn;
  }
  return legacyDomainLock(domain, lockId, holder);
}

const ONE_MUTEX = 'vmsnap-one-mutex';
/**
 * How long the lock stands before it asks whether its holder still runs (a probe signal in the
 * holder's history). Only a holder closed without releasing needs it (a terminated run, one a
 * Reset replaced); a contender's request looks at once, so it only bounds how long such a lock
 * keeps running with nobody asking.
 */
const LOCK_LEASE_MS = 300_000;

function domainBusy(name: string, lockId: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `another vmsnap run of ${name} (a snapshot or an in-place restore) is in progress (lock workflow ${lockId}); ` +
      'only one runs per VM at a time — retry when it finishes',
    FailureType.DomainBusy,
  );
}

/** Before vmsnap-one-mutex: a `domainLock` child whose id only one execution can hold. */
async function legacyDomainLock(domain: { name: string; uuid: string }, lockId: string, holder: { workflowId: string; runId: string }): Promise<HeldLock> {
  answerHolderProbes();
  const start = () =>
    // Started outside the caller's cancellation scope: cancelling the snapshot run must not
    // cancel its lock before the compensations (which still need the domain) have run.
    CancellationScope.nonCancellable(() =>
      startChild(domainLock, {
        workflowId: lockId,
        args: [holder],
        parentClosePolicy: ParentClosePolicy.TERMINATE,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        staticSummary: `lock on ${domain.name} held by ${holder.workflowId}`,
      }),
    );
  try {
    return heldLock(await startOrTakeBack(lockId, holder, start), lockId, holder);
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw domainBusy(domain.name, lockId);
    throw err;
  }
}

type LockChild = ChildWorkflowHandle<typeof domainLock>;

/** The lock started for this run; or taken back from a run a Reset replaced, or from a leaked holder. */
async function startOrTakeBack(lockId: string, holder: { workflowId: string }, start: () => Promise<LockChild>): Promise<LockChild> {
  try {
    return await start();
  } catch (err) {
    // A Reset terminates the run it replaces without terminating that run's lock (observed on
    // Temporal 1.5.1's dev server): the lock still names this workflow id as its holder. Only
    // one run of an id runs at a time, so that holder is gone: take the lock back.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    // patched(), never deprecated: a Reset run replays the events its replaced run wrote, where
    // this branch was not taken (that run waited on a busy lock), and only patched() can say so.
    if (isResetRun() && patched('vmsnap-lock-takeover')) return takeOver(lockId, holder.workflowId, start, err);
    // Held by another workflow id: by a live run (busy), or by one a Reset replaced whose new
    // run failed before it took the lock back (leaked: the check releases it).
    if (patched(HOLDER_CHECK)) return startAfterHolderCheck(lockId, start, err);
    throw err;
  }
}

function heldLock(child: LockChild, lockId: string, holder: { workflowId: string }): HeldLock {
  return {
    release: () =>
      CancellationScope.nonCancellable(async () => {
        try {
          await child.signal(releaseLock);
        } catch {
          // After a Reset the lock's parent is the replaced run, so a child-only signal from
          // this run fails: release it by its run id instead. Its completion is reported to
          // that old parent, so there is no result to wait for here. (Deprecated patch,
          // docs/versioning.md: no kept history predates it.)
          deprecatePatch('vmsnap-lock-release-after-reset');
          try {
            await getExternalWorkflowHandle(lockId, child.firstExecutionRunId).signal(releaseLockFor, { workflowId: holder.workflowId });
          } catch (again) {
            log.warn('domain lock was already released', { lock: lockId, error: String(again) });
          }
          return;
        }
        try {
          await child.result();
        } catch (err) {
          // Already gone (terminated by hand): the lock is free either way.
          log.warn('domain lock was already released', { lock: lockId, error: String(err) });
        }
      }),
  };
}

/** Histories from before a contender asked a taken lock to check its holder. */
export const HOLDER_CHECK = 'vmsnap-lock-holder-check';

/** A run made by Reset keeps the replaced run's first run id (its start event is copied). */
export function isResetRun(): boolean {
  const info = workflowInfo();
  return info.firstExecutionRunId !== info.runId && !info.continuedFromExecutionRunId;
}

/** Asks a running lock to release itself if it is held for this workflow id, then starts ours. */
async function takeOver<T>(lockId: string, workflowId: string, start: () => Promise<T>, busy: unknown): Promise<T> {
  try {
    await getExternalWorkflowHandle(lockId).signal(releaseLockFor, { workflowId });
  } catch {
    // Not running any more: the start below will tell.
  }
  for (let i = 0; i < 4; i++) {
    await sleep(750);
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  // Still held: by another workflow id (a real concurrent run), which the signal did not release.
  throw busy;
}
