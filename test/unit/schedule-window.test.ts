import { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpec } from '../../src/cli/schedule/spec';
import { temporalBinary } from '../../support/fast/temporal-binary';

/** What Temporal does with a --window spec: the start times it plans, on a throwaway dev server. */
let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: temporalBinary() } } });
}, 120_000);
afterAll(async () => env?.teardown());

async function plannedStarts(window: string): Promise<Date[]> {
  const id = `window-${window.replace(/\W/g, '')}`;
  const handle = await env.client.schedule.create({
    scheduleId: id,
    spec: parseSpec({ window }),
    action: { type: 'startWorkflow', workflowType: 'consistentSnapshot', taskQueue: 'nobody-polls', args: [{ domain: 'vm-1' }] },
  });
  try {
    return (await handle.describe()).info.nextActionTimes;
  } finally {
    await handle.delete();
  }
}

const minuteOfDay = (d: Date) => d.getUTCHours() * 60 + d.getUTCMinutes();

describe('schedule --window', () => {
  it('every planned start is inside the window, at a moment that differs from day to day', async () => {
    const starts = await plannedStarts('01:00-05:00');
    expect(starts.length).toBeGreaterThanOrEqual(5);
    for (const s of starts) {
      expect(minuteOfDay(s)).toBeGreaterThanOrEqual(60);
      expect(minuteOfDay(s)).toBeLessThan(300);
    }
    expect(new Set(starts.map(minuteOfDay)).size).toBeGreaterThan(1);
  });

  it('a window across midnight starts between its beginning and its end on the next day', async () => {
    for (const s of await plannedStarts('22:00-02:00')) {
      const m = minuteOfDay(s);
      expect(m >= 22 * 60 || m < 2 * 60, s.toISOString()).toBe(true);
    }
  });
});
