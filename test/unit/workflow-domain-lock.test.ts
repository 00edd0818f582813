import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model/failures';
import { lockWorkflowId } from '../../src/model/naming';
import { FakeHost } from '../../support/fast/fake-host';
import { failureOf } from '../helpers/failure-of';
import { limitState } from '../helpers/limit-turns';
import { until } from '../helpers/until';
import { resetToFirstTask, useWorkflowLane } from '../helpers/workflow-lane';

/*
 * The domain lock as a use of the fleet limits' primitive (issue 29 #4, vmsnap-one-mutex): a
 * limit of one without a queue, `vmsnap-lock-<uuid>` on the fleet queue. A run that starts it
 * holds it; while a live run holds it another run is refused at once (DomainBusy); a holder
 * whose run is closed lets go, checked by workflow id; a run a Reset made takes its replaced
 * run's grant back. A lock of the legacy kind (a `domainLock` child) running under the same id
 * is respected, and taken back from a closed holder.
 */
const laneOf = useWorkflowLane();
const keepSnapshot = { target: { clone: false } } as const;
const BUSY = /another vmsnap run of vm-[a-z0-9-]+ \(a snapshot or an in-place restore\) is in progress \(lock workflow vmsnap-lock-[0-9a-f-]+\); only one runs per VM at a time — retry when it finishes/;


const lockOf = (h: FakeHost) => lockWorkflowId(h.domain.uuid);
const lockEnded = (h: FakeHost) => until(`${lockOf(h)} ended`, async () => (await laneOf().lockState(h)) === 'COMPLETED', 15_000, 100);
const lockHolders = async (h: FakeHost) => (await limitState(laneOf().client, lockOf(h))).held.map((e) => e.workflowId);

/** A second run of the VM under another workflow id; its result. */
async function next(h: FakeHost, tag: string) {
  return (await laneOf().start(h, { quiesce: 'require', ...keepSnapshot }, { workflowId: `snap-${h.domain.name}-${tag}` })).result();
}

/** A run that holds the lock, hung in its freeze (a local activity inside the window). */
async function holding(h: FakeHost) {
  const run = await laneOf().start(h, { quiesce: 'require', ...keepSnapshot });
  await h.reached('freezeGuest');
  return run;
}

describe('the domain lock, a limit of one without a queue', () => {
  it('a second run is DomainBusy at once while the first holds it, with the message and type of before', async () => {
    const h = new FakeHost('vm-mutex-busy').hang('freezeGuest');
    const holder = await holding(h);
    expect((await laneOf().client.workflow.getHandle(lockOf(h)).describe()).type).toBe('fleetLimit');
    const t0 = Date.now();
    const f = await failureOf(next(h, 'busy'));
    expect(f.type).toBe(FailureType.DomainBusy);
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toMatch(BUSY);
    expect(Date.now() - t0, 'refused at once, not after a wait').toBeLessThan(5000);
    expect(await lockHolders(h)).toEqual([holder.workflowId]);
    await holder.terminate('test done');
  });

  it.each(['completed', 'failed', 'cancelled'] as const)('a run that %s lets go: the lock ends and the next run is not DomainBusy', async (end) => {
    const h = new FakeHost(`vm-mutex-${end}`);
    if (end === 'failed') h.script('snapshotDisks', async (_req, _real, attempt) => {
      if (attempt === 1) throw ApplicationFailure.nonRetryable('rbd snap create failed', FailureType.SnapshotFailed);
      return _real();
    });
    if (end === 'cancelled') h.hang('freezeGuest');
    const first = await laneOf().start(h, { quiesce: 'require', ...keepSnapshot });
    if (end === 'cancelled') {
      await h.reached('freezeGuest');
      await first.cancel();
    }
    const outcome = await first.result().then(
      () => 'completed',
      () => 'failed',
    );
    expect(outcome).toBe(end === 'completed' ? 'completed' : 'failed');
    await lockEnded(h);
    expect((await next(h, 'after')).quiesced).toBe(true);
    await lockEnded(h);
  });

  it('a terminated holder’s grant stays until the next request, which finds it closed and takes the lock', async () => {
    const h = new FakeHost('vm-mutex-terminated').hang('freezeGuest');
    const holder = await holding(h);
    await holder.terminate('operator');
    await sleep(1000);
    expect(await laneOf().lockState(h)).toBe('RUNNING');
    expect(await lockHolders(h)).toEqual([holder.workflowId]);
    const r = await next(h, 'after');
    expect(r.quiesced).toBe(true);
    await lockEnded(h);
  });

  it('a Reset of the run holding the lock takes it back (same ticket) and completes; the next run is not DomainBusy', async () => {
    const h = new FakeHost('vm-mutex-reset').hang('freezeGuest');
    const first = await holding(h);
    const [before] = (await limitState(laneOf().client, lockOf(h))).held;
    const newRunId = await resetToFirstTask(laneOf().client, first.workflowId);
    const r = await laneOf().client.workflow.getHandle(first.workflowId, newRunId).result();
    expect(r.quiesced).toBe(true);
    expect(before!.workflowId).toBe(first.workflowId);
    // The Reset run's request named the replaced run's ticket and replaced its grant.
    const asked = (await laneOf().client.workflow.getHandle(first.workflowId, newRunId).fetchHistory()).events!.filter(
      (e) => e.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName === 'limitRequest',
    );
    expect(asked.length).toBe(1);
    await lockEnded(h);
    expect((await next(h, 'after')).quiesced).toBe(true);
    expect(h.frozen).toBe(0);
  });
});

describe('a legacy domain lock (a domainLock child) under the same id', () => {
  it('held by a live run: the new run is DomainBusy; held by a closed run: the new run takes it and completes', async () => {
    const h = new FakeHost('vm-mutex-legacy');
    const c = laneOf().client;
    // The holder: any running workflow (a legacy lock of another id), as a run of older code.
    const live = await c.workflow.start('domainLock', { taskQueue: laneOf().taskQueue, workflowId: `holder-${randomUUID().slice(0, 8)}`, args: [{ workflowId: 'nobody', runId: 'none' }] });
    const legacy = await c.workflow.start('domainLock', {
      taskQueue: laneOf().taskQueue,
      workflowId: lockOf(h),
      args: [{ workflowId: live.workflowId, runId: live.firstExecutionRunId }],
    });
    const f = await failureOf(next(h, 'while-legacy'));
    expect(f.type).toBe(FailureType.DomainBusy);
    expect((await legacy.describe()).status.name).toBe('RUNNING');
    await live.terminate('the legacy holder is gone');
    const r = await next(h, 'after-legacy');
    expect(r.quiesced).toBe(true);
    expect((await legacy.describe()).status.name).toBe('COMPLETED');
    await lockEnded(h);
  });
});

