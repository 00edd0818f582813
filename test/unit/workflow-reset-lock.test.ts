import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model/failures';
import { lockWorkflowId } from '../../src/model/naming';
import { FakeHost } from '../../support/fast/fake-host';
import { failureOf } from '../helpers/failure-of';
import { turnsHeldBy } from '../helpers/limit-turns';
import { resetToFirstTask, useWorkflowLane } from '../helpers/workflow-lane';

/*
 * Issue 25 #6 on the real workflow code: a Reset does not end the replaced run's domain lock and
 * fleet-limit slots (now: turns), and when the new run fails before it takes them back (here: the VM stopped,
 * so its inspect fails), nothing released them — every later run of the VM failed DomainBusy.
 * A contender now asks a taken lock (or slot) to check its holder run; a closed holder lets go,
 * a live one never does.
 */
const laneOf = useWorkflowLane();
const keepSnapshot = { target: { clone: false } } as const;
const limits = { windowsPerHost: 1, snapshotsPerCluster: 1 };

/** A host whose inspect reports fleet limits (so runs hold slots), and fails once on `failOnAttempt`. */
function hostWithLimits(name: string, failOnAttempt: number): FakeHost {
  const h = new FakeHost(name);
  return h.script('inspectDomain', async (_req, real, attempt) => {
    if (attempt === failOnAttempt) throw ApplicationFailure.nonRetryable(`${name} is shut off`, FailureType.DomainNotRunning);
    return { ...(await real()), limits };
  });
}

async function status(workflowId: string): Promise<string> {
  return (await laneOf().client.workflow.getHandle(workflowId).describe()).status.name;
}

describe('a Reset whose new run fails before the lock', () => {
  it('the next run of that VM is not DomainBusy, and the slots the replaced run held are free again', async () => {
    const h = hostWithLimits('vm-reset-1', 2).hang('freezeGuest');
    const first = await laneOf().start(h, { quiesce: 'require', ...keepSnapshot });
    await h.reached('freezeGuest'); // lock and both slots held, guest frozen
    const newRunId = await resetToFirstTask(laneOf().client, first.workflowId);
    const f = await failureOf(laneOf().client.workflow.getHandle(first.workflowId, newRunId).result());
    expect(f.type).toBe(FailureType.DomainNotRunning);
    // What the reset left: the replaced run's lock, still running.
    expect(await laneOf().lockState(h)).toBe('RUNNING');

    const next = await laneOf().start(h, { quiesce: 'require', ...keepSnapshot }, { workflowId: `snap-${h.domain.name}-next` });
    const r = await next.result();
    expect(r).toMatchObject({ quiesced: true });
    // Given back by a signal the run waits to be delivered, not for the lock's end: a moment later.
    for (let i = 0; i < 50 && (await laneOf().lockState(h)) === 'RUNNING'; i++) await new Promise((ok) => setTimeout(ok, 100));
    expect(await laneOf().lockState(h)).toBe('COMPLETED');
    // Its turns of the fleet limits: let go once the limit found the replaced run closed.
    expect(await turnsHeldBy(laneOf().client, first.workflowId)).toEqual([]);
    expect(h.frozen).toBe(0);
  }, 60_000);

  it('a lock whose holder still runs is kept: the contender is DomainBusy', async () => {
    const h = new FakeHost('vm-reset-2').hang('freezeGuest');
    const holder = await laneOf().start(h, { quiesce: 'require', ...keepSnapshot });
    await h.reached('freezeGuest');
    const f = await failureOf((await laneOf().start(h, { quiesce: 'require', ...keepSnapshot }, { workflowId: `snap-${h.domain.name}-next` })).result());
    expect(f.type).toBe(FailureType.DomainBusy);
    expect(await status(holder.workflowId)).toBe('RUNNING');
    expect(await status(lockWorkflowId(h.domain.uuid))).toBe('RUNNING');
    await holder.terminate('test done');
  });
});
