import { describe, expect, it } from 'vitest';
import { CliError } from '../../src/cli/exit-codes';
import { cronOf, describeSpec, parseOverlap, parseSpec, scheduleId } from '../../src/cli/schedule/spec';

const exit2 = (fn: () => unknown, message: RegExp) => {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(CliError);
  expect((err as CliError).exitCode).toBe(2);
  expect((err as CliError).message).toMatch(message);
};

describe('schedule flag parsing', () => {
  it('turns --window into a daily start at its beginning, spread by Temporal over its length (across midnight too)', () => {
    expect(parseSpec({ window: '01:00-05:00' })).toEqual({ cronExpressions: ['0 1 * * *'], jitter: 4 * 3_600_000 });
    expect(parseSpec({ window: '22:30-02:00', timezone: 'Europe/Berlin' })).toEqual({ cronExpressions: ['30 22 * * *'], jitter: 210 * 60_000, timezone: 'Europe/Berlin' });
    // Described back in --window's own words, across midnight too.
    expect(describeSpec({ cronExpressions: ['0 1 * * *'], jitter: 4 * 3_600_000 })).toBe('daily in 01:00-05:00');
    expect(describeSpec({ cronExpressions: ['30 22 * * *'], jitter: 210 * 60_000, timezone: 'Europe/Berlin' })).toBe('daily in 22:30-02:00 (Europe/Berlin)');
    expect(describeSpec({ cronExpressions: ['0 1 * * 1'], jitter: 60_000 })).toBe('cron 0 1 * * 1, spread over 1m');
  });

  it('turns --every into an interval in ms and --cron into a cron expression', () => {
    expect(parseSpec({ everyMs: 3_600_000 })).toEqual({ intervals: [{ every: 3_600_000 }] });
    expect(parseSpec({ cron: ' 0 3 * * * ' })).toEqual({ cronExpressions: ['0 3 * * *'] });
    expect(parseSpec({ cron: '@daily', timezone: 'Europe/Berlin' })).toEqual({ cronExpressions: ['@daily'], timezone: 'Europe/Berlin' });
    expect(parseSpec({ cron: '*/15 1-5 ? JAN,JUL MON-FRI' }).cronExpressions).toHaveLength(1);
  });

  it('rejects ambiguous, missing and malformed specs', () => {
    exit2(() => parseSpec({}), /exactly one of --every/);
    exit2(() => parseSpec({ everyMs: 3_600_000, cron: '0 3 * * *' }), /exactly one of/);
    exit2(() => parseSpec({ cron: '0 3 * *' }), /five fields/);
    exit2(() => parseSpec({ cron: '0 3 * * * ; rm -rf /' }), /five fields/);
    exit2(() => parseSpec({ cron: '$(reboot) 3 * * *' }), /five fields/);
    exit2(() => parseSpec({ everyMs: 3_600_000, timezone: 'Nowhere/Else' }), /unknown --timezone/);
    exit2(() => parseSpec({ window: '01:00-05:00', cron: '0 3 * * *' }), /exactly one of/);
    for (const w of ['1:00-05:00', '01:00', '01:00-24:00', '01:00-05:60', '01:00-05:00-06:00', '$(reboot)']) exit2(() => parseSpec({ window: w }), /--window expects HH:MM-HH:MM/);
    exit2(() => parseSpec({ window: '03:00-03:00' }), /is empty/);
  });

  it('parses overlap policies', () => {
    expect(parseOverlap(undefined)).toBe('SKIP');
    expect(parseOverlap('buffer-one')).toBe('BUFFER_ONE');
    expect(parseOverlap('allow-all')).toBe('ALLOW_ALL');
    exit2(() => parseOverlap('cancel-other'), /must be one of skip, buffer-one, allow-all/);
  });

  it('accepts only plain schedule ids (they become workflow ids and an RBD label)', () => {
    expect(scheduleId('nightly-vm42.db_1')).toBe('nightly-vm42.db_1');
    for (const bad of ['', 'a b', '-x', 'a/b', 'a@b', 'x'.repeat(101), '$(id)']) exit2(() => scheduleId(bad), /schedule.id/);
  });

  it('describes specs for humans', () => {
    expect(describeSpec({ intervals: [{ every: 3_600_000 }] })).toBe('every 1h');
    expect(describeSpec({ intervals: [{ every: 90_000 }], timezone: 'UTC' })).toBe('every 1m30s (UTC)');
    expect(describeSpec({ cronExpressions: ['0 3 * * *'] })).toBe('cron 0 3 * * *');
  });

  // As the lab's Temporal (CLI v1.5.1) describes the cron schedules it was given.
  const r = (start: number | string, end = start, step = 1) => ({ start, end, step });
  const calendar = (o: Record<string, unknown>) => ({
    second: [r(0)],
    minute: [r(0)],
    hour: [r(0)],
    dayOfMonth: [r(1, 31)],
    month: [r('JANUARY', 'DECEMBER')],
    year: [],
    dayOfWeek: [r('SUNDAY', 'SATURDAY')],
    comment: '',
    ...o,
  });

  it('shows a calendar the server keeps for a cron expression as that cron expression', () => {
    expect(cronOf(calendar({ hour: [r(3)] }))).toBe('0 3 * * *');
    expect(cronOf(calendar({ minute: [r(0, 59, 15)], hour: [r(1, 5)], month: [r('JANUARY'), r('JULY')], dayOfWeek: [r('MONDAY', 'FRIDAY')] }))).toBe('*/15 1-5 * JAN,JUL MON-FRI');
    expect(cronOf(calendar({ minute: [r(30)], hour: [r(22)], dayOfMonth: [r(1)] }))).toBe('30 22 1 * *');
    expect(describeSpec({ calendars: [calendar({ hour: [r(3)] })] })).toBe('cron 0 3 * * *');
    expect(describeSpec({ calendars: [calendar({ hour: [r(1)] })], jitter: 4 * 3_600_000 })).toBe('daily in 01:00-05:00');
  });
});
