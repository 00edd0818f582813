import type { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { FakeHost } from '../../support/fast/fake-host';
import { useWorkflowLane } from '../helpers/workflow-lane';

/*
 * What a snapshot-only run costs in Temporal round trips (issue 31: the run outside the window),
 * counted from its history — machine-independent, unlike its wall time. The checks (inspect,
 * target names) are local activities in the host worker, and the limits' turns are given back
 * in the workflow task that schedules the copies, not one workflow task per turn.
 */
const laneOf = useWorkflowLane();
const limits = { windowsPerHost: 2, snapshotsPerCluster: 3 };

type Event = temporal.api.history.v1.IHistoryEvent;
const EventType = { WFT_COMPLETED: 7, ACTIVITY_SCHEDULED: 10, MARKER: 25, SIGNAL_EXTERNAL: 37 };

/** The history split at each completed workflow task: what each task's commands were. */
function tasks(events: Event[]): Event[][] {
  const out: Event[][] = [];
  let current: Event[] | undefined;
  for (const e of events) {
    if (Number(e.eventType) === EventType.WFT_COMPLETED) out.push((current = []));
    else current?.push(e);
  }
  return out;
}

describe('a snapshot-only run’s round trips', () => {
  it('checks are local activities; the turns are given back with the copies’ scheduling, in one workflow task', async () => {
    const h = new FakeHost('vm-round-trips').script('inspectDomain', async (_req, real) => ({ ...(await real()), limits }));
    const run = await laneOf().start(h, { quiesce: 'require', target: { clone: false } });
    const r = await run.result();
    expect(r.quiesced).toBe(true);
    const events = (await run.fetchHistory()).events ?? [];
    const scheduled = events.filter((e) => Number(e.eventType) === EventType.ACTIVITY_SCHEDULED).map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name);
    expect(scheduled).not.toContain('inspectDomain');
    expect(scheduled).not.toContain('checkTargets');

    const releases = tasks(events).filter((t) => t.some((e) => e.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName === 'limitRelease'));
    expect(releases).toHaveLength(1);
    const [task] = releases;
    expect(task!.filter((e) => e.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName === 'limitRelease')).toHaveLength(2);
    expect(task!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'finalizeDisk')).toHaveLength(h.disks.length);

    const workflowTasks = events.filter((e) => Number(e.eventType) === EventType.WFT_COMPLETED).length;
    console.log(`snapshot-only run, ${h.disks.length} disks, 2 limits: ${events.length} history events, ${workflowTasks} workflow tasks`);
  });
});
