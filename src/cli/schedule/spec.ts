import { ScheduleOverlapPolicy } from '@temporalio/client';
import type { ScheduleSpec } from '@temporalio/client';
import { CliError, Exit } from '../exit-codes';

/*
 * Flag parsing for `vmsnap schedule`: pure, so bad flags fail with exit 2 before anything is
 * contacted, and unit-testable.
 */

/** Temporal schedule ids become workflow id prefixes and the RBD label value: keep them plain. */
export const SCHEDULE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export const OVERLAP: Record<string, ScheduleOverlapPolicy> = {
  skip: ScheduleOverlapPolicy.SKIP,
  'buffer-one': ScheduleOverlapPolicy.BUFFER_ONE,
  'allow-all': ScheduleOverlapPolicy.ALLOW_ALL,
};

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^([1-9][0-9]{0,6})(s|m|h|d)$/;
/** Five cron fields (minute hour day-of-month month day-of-week) or an @-macro Temporal accepts. */
const CRON_FIELD = /^[0-9A-Za-z*?,/#LW-]+$/;
const CRON_MACRO = /^@(yearly|annually|monthly|weekly|daily|hourly)$/;

export function scheduleId(id: string | undefined): string {
  if (!id) throw new CliError('missing <schedule-id> (see --help)', Exit.badInput);
  if (!SCHEDULE_ID.test(id)) throw new CliError(`invalid schedule id "${id}": use [A-Za-z0-9._-], at most 100 chars`, Exit.badInput);
  return id;
}

/** `1h`, `30m`, `90s`, `1d` → milliseconds; at least 10 s (a snapshot takes seconds). */
export function parseDuration(flag: string, s: string, minMs = 10_000): number {
  const m = DURATION.exec(s);
  if (!m) throw new CliError(`--${flag} expects a duration like 90s, 30m, 1h or 1d, got "${s}"`, Exit.badInput);
  const ms = Number(m[1]) * UNIT_MS[m[2]];
  if (ms < minMs) throw new CliError(`--${flag} must be at least ${minMs / 1000}s`, Exit.badInput);
  return ms;
}

const CLOCK = /^([01][0-9]|2[0-3]):([0-5][0-9])$/;

export function parseSpec(v: { every?: string; cron?: string; window?: string; timezone?: string }): ScheduleSpec {
  if ([v.every, v.cron, v.window].filter(Boolean).length !== 1) throw new CliError('give exactly one of --every DURATION, --cron EXPR or --window HH:MM-HH:MM', Exit.badInput);
  const tz = v.timezone ? { timezone: timezone(v.timezone) } : {};
  if (v.every) return { intervals: [{ every: parseDuration('every', v.every) }], ...tz };
  if (v.window) return { ...dailyWindow(v.window), ...tz };
  const expr = v.cron!.trim();
  const fields = expr.split(/\s+/);
  if (!CRON_MACRO.test(expr) && (fields.length !== 5 || !fields.every((f) => CRON_FIELD.test(f)))) {
    throw new CliError(`--cron expects five fields "minute hour day month weekday" (e.g. '0 3 * * *') or @daily, got "${v.cron}"`, Exit.badInput);
  }
  return { cronExpressions: [expr], ...tz };
}

/**
 * `--window 01:00-05:00`: daily, at a moment Temporal picks anew each day within the window (the
 * schedule's own jitter), so a fleet of schedules with one window spreads its starts over it
 * instead of meeting Temporal's per-namespace start rate at one instant. A window may cross
 * midnight (22:00-02:00).
 */
function dailyWindow(w: string): ScheduleSpec {
  const [from, to, ...rest] = w.split('-');
  const a = CLOCK.exec(from ?? '');
  const b = CLOCK.exec(to ?? '');
  if (!a || !b || rest.length) throw new CliError(`--window expects HH:MM-HH:MM (24-hour, e.g. 01:00-05:00), got "${w}"`, Exit.badInput);
  const start = Number(a[1]) * 60 + Number(a[2]);
  const minutes = (Number(b[1]) * 60 + Number(b[2]) - start + 1440) % 1440;
  if (minutes < 1) throw new CliError(`--window ${w} is empty: its end must differ from its start`, Exit.badInput);
  return { cronExpressions: [`${Number(a[2])} ${Number(a[1])} * * *`], jitter: minutes * 60_000 };
}

export function parseOverlap(s: string | undefined): ScheduleOverlapPolicy {
  const o = OVERLAP[s ?? 'skip'];
  if (!o) throw new CliError(`--overlap must be one of ${Object.keys(OVERLAP).join(', ')}, got "${s}"`, Exit.badInput);
  return o;
}

function timezone(tz: string): string {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new CliError(`unknown --timezone "${tz}" (an IANA name like Europe/Berlin)`, Exit.badInput);
  }
  return tz;
}

/** "every 1h" / "cron 0 3 * * *" for humans, from a described spec. */
export function describeSpec(spec: { intervals?: { every: number | string }[]; calendars?: unknown[]; cronExpressions?: string[]; timezone?: string; jitter?: number | string }): string {
  const parts: string[] = [];
  for (const i of spec.intervals ?? []) parts.push(`every ${humanMs(Number(i.every))}`);
  for (const c of spec.cronExpressions ?? []) parts.push(`cron ${c}`);
  if (spec.calendars?.length) parts.push(`${spec.calendars.length} calendar spec(s)`);
  if (spec.jitter && Number(spec.jitter) > 0) parts.push(`spread over ${humanMs(Number(spec.jitter))}`);
  const text = parts.join(', ') || 'no spec';
  return spec.timezone ? `${text} (${spec.timezone})` : text;
}

function humanMs(ms: number): string {
  for (const [u, n] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= n && ms % n === 0) return `${ms / n}${u}`;
  }
  return `${ms}ms`;
}
