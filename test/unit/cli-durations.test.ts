import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DurationError, formatDuration, parseDuration } from '../../src/cli/durations';
import { CliError } from '../../src/cli/exit-codes';
import { parseSince } from '../../src/cli/since';

const fails = (text: string, rule = {}, message: RegExp = /expects a duration/) => {
  let err: unknown;
  try {
    parseDuration(text, rule);
  } catch (e) {
    err = e;
  }
  expect(err, text).toBeInstanceOf(DurationError);
  expect((err as Error).message).toMatch(message);
};

describe('parseDuration: one syntax for every duration flag', () => {
  it.each([
    ['500ms', 500],
    ['90s', 90_000],
    ['30m', 1_800_000],
    ['1h30m', 5_400_000],
    ['1d', 86_400_000],
    ['2d3h4m5s6ms', 2 * 86_400_000 + 3 * 3_600_000 + 4 * 60_000 + 5000 + 6],
    ['0s', 0],
    ['10000ms', 10_000],
  ])('%s = %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '10', '1.5h', '1h1h', '30m1h', '1 h', '-1s', '1w', 'h', '1hour', '1H', '5x', '1h 30m', '1s500'])('refuses %j', (text) => fails(text));

  it('reads bare numbers only in the unit the old flag spelling had', () => {
    expect(parseDuration('10000', { bare: 'ms' })).toBe(10_000);
    expect(parseDuration('5', { bare: 's' })).toBe(5000);
    // ...and the old spellings take the new forms too.
    expect(parseDuration('10s', { bare: 'ms' })).toBe(10_000);
    fails('-1', { bare: 'ms' });
    fails('1e3', { bare: 'ms' });
  });

  it('holds the flag to its bounds and step', () => {
    fails('5s', { min: 10_000 }, /must be at least 10s, got "5s"/);
    fails('2m', { max: 99_000 }, /must be at most 1m39s/);
    fails('1500ms', { step: 1000 }, /whole 1s steps/);
    expect(parseDuration('2s', { step: 1000 })).toBe(2000);
    fails('9999999999999999999d', {}, /too long/);
  });

  it('formatDuration writes what parseDuration reads back, for any duration', () => {
    expect(formatDuration(5_400_000)).toBe('1h30m');
    expect(formatDuration(1500)).toBe('1s500ms');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 400 * 86_400_000 }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
    );
  });

  it('any well-formed sequence of terms is the sum of its terms', () => {
    const units = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000], ['ms', 1]] as const;
    fc.assert(
      fc.property(fc.array(fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: undefined }), { minLength: 5, maxLength: 5 }), (counts) => {
        const terms = units.flatMap(([u, ms], i) => (counts[i] === undefined ? [] : [[`${counts[i]}${u}`, counts[i]! * ms] as const]));
        if (!terms.length) return;
        expect(parseDuration(terms.map((t) => t[0]).join(''))).toBe(terms.reduce((n, t) => n + t[1], 0));
      }),
    );
  });
});

describe('--since: a duration back from now, a UTC date, or a time with its zone', () => {
  const now = Date.parse('2026-12-06T12:00:00Z');
  it.each([
    ['24h', now - 86_400_000],
    ['1h30m', now - 5_400_000],
    ['2026-12-01', Date.parse('2026-12-01T00:00:00Z')],
    ['2026-12-01T03:00:00Z', Date.parse('2026-12-01T03:00:00Z')],
    ['2026-12-01T03:00:00+02:00', Date.parse('2026-12-01T01:00:00Z')],
  ])('%s', (text, ms) => {
    expect(parseSince(text, now)).toBe(ms);
  });

  it.each(['yesterday', '2026-02-30', '2026-12-01T03:00:00', '2026-12-01 03:00', '24'])('refuses %j (exit 2)', (text) => {
    expect(() => parseSince(text, now)).toThrow(CliError);
    expect(() => parseSince(text, now)).toThrow(/--since expects/);
  });
});
