import type { ScheduleDescription } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { CliError } from '../../src/cli/exit-codes';
import { updated } from '../../src/cli/schedule/update';

/*
 * `vmsnap schedule update`'s new schedule, computed from the described one before anything is
 * sent (the lab test in test/integration/cli-schedule.test.ts sends it).
 */
const input = { domain: 'vm-42', labels: { schedule: 's1' }, retention: { keepLast: 7 }, quiesce: 'require' };
const prev = {
  scheduleId: 's1',
  spec: { intervals: [{ every: 3_600_000, offset: 0 }], calendars: [], skip: [], timezone: '' },
  action: {
    type: 'startWorkflow',
    workflowType: 'consistentSnapshot',
    workflowId: 'sched-s1',
    taskQueue: 'vmsnap',
    args: [input],
    memo: { input, schedule: 's1' },
    searchAttributes: { VmsnapDomain: ['vm-42'] },
    typedSearchAttributes: { getAll: () => [] },
    staticSummary: 'scheduled snapshot of vm-42 (s1) → images',
  },
  policies: { overlap: 'SKIP', catchupWindow: 3_600_000, pauseOnFailure: false },
  state: { paused: true, note: 'quiet' },
} as unknown as ScheduleDescription;

const refused = (fn: () => unknown, type: string, message: RegExp) => {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(CliError);
  expect((err as CliError).exitCode).toBe(2);
  expect((err as CliError).type).toBe(type);
  expect((err as CliError).message).toMatch(message);
};

describe('schedule update: the schedule it sends', () => {
  it('replaces the retention with the tiers given, in the run input and its memo, and keeps the rest', () => {
    const u = updated('s1', prev, { retention: { keepLast: 2, keepWeekly: 4 } });
    expect(u.action.args).toEqual([{ ...input, retention: { keepLast: 2, keepWeekly: 4 } }]);
    expect(u.action.memo).toEqual({ input: { ...input, retention: { keepLast: 2, keepWeekly: 4 } }, schedule: 's1' });
    expect(u.spec).toBe(prev.spec);
    expect(u.policies).toEqual({ overlap: 'SKIP', catchupWindow: 3_600_000, pauseOnFailure: false });
    expect(u.state).toEqual({ paused: true, note: 'quiet' });
    expect(u.action).toMatchObject({ workflowType: 'consistentSnapshot', workflowId: 'sched-s1', taskQueue: 'vmsnap', staticSummary: prev.action.staticSummary });
    expect(u.action).not.toHaveProperty('searchAttributes'); // sent once, typed
  });

  it('removes the retention (null), or leaves it when none is given', () => {
    expect((updated('s1', prev, { retention: null }).action.args![0] as Record<string, unknown>).retention).toBeUndefined();
    expect((updated('s1', prev, { overlap: 'BUFFER_ONE' as never }).action.args![0] as Record<string, unknown>).retention).toEqual({ keepLast: 7 });
  });

  it('replaces the spec, or only its timezone, and the policies given', () => {
    expect(updated('s1', prev, { spec: { cronExpressions: ['0 3 * * *'] } }).spec).toEqual({ cronExpressions: ['0 3 * * *'] });
    expect(updated('s1', prev, { timezone: 'Europe/Berlin' }).spec).toEqual({ ...prev.spec, timezone: 'Europe/Berlin' });
    expect(updated('s1', prev, { catchupWindow: 60_000, pauseOnFailure: true }).policies).toEqual({ overlap: 'SKIP', catchupWindow: 60_000, pauseOnFailure: true });
  });

  it('refuses what create would refuse, and schedules that are not vmsnap’s', () => {
    const snapOnly = { ...prev, action: { ...prev.action, args: [{ ...input, retention: undefined, target: { clone: false } }] } } as unknown as ScheduleDescription;
    refused(() => updated('s1', snapOnly, { retention: { keepLast: 2 } }), 'InvalidInput', /retention .*clone/);
    const foreign = { ...prev, action: { ...prev.action, workflowType: 'somethingElse' } } as unknown as ScheduleDescription;
    refused(() => updated('s1', foreign, { retention: { keepLast: 2 } }), 'NotVmsnapSchedule', /not a vmsnap schedule/);
  });
});
