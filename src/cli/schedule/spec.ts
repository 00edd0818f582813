import { ScheduleOverlapPolicy } from '@temporalio/client';
import type { ScheduleSpec } from '@temporalio/client';
import { formatDuration } from '../durations';
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

/** Five cron fields (minute hour day-of-month month day-of-week) or an @-macro Temporal accepts. */
const CRON_FIELD = /^[0-9A-Za-z*?,/#LW-]+$/;
const CRON_MACRO = /^@(yearly|annually|monthly|weekly|daily|hourly)$/;

export function scheduleId(id: string | undefined): string {
  if (!id) throw new CliError('missing <schedule-id> (see --help)', Exit.badInput);
  if (!SCHEDULE_ID.test(id)) throw new CliError(`invalid schedule id "${id}": use [A-Za-z0-9._-], at most 100 chars`, Exit.badInput);
  return id;
}

const CLOCK = /^([01][0-9]|2[0-3]):([0-5][0-9])$/;

/** The spec flags as parsed: `--every` already in ms (durations.ts; its table entry sets the 10 s floor). */
export interface SpecFlags {
  everyMs?: number;
  cron?: string;
  window?: string;
  timezone?: string;
}

export function parseSpec(v: SpecFlags): ScheduleSpec {
  if ([v.everyMs !== undefined, !!v.cron, !!v.window].filter(Boolean).length !== 1) {
    throw new CliError('give exactly one of --every DURATION, --cron EXPR or --window HH:MM-HH:MM', Exit.badInput);
  }
  const tz = v.timezone ? { timezone: timezone(v.timezone) } : {};
  if (v.everyMs !== undefined) return { intervals: [{ every: v.everyMs }], ...tz };
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

export function timezone(tz: string): string {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new CliError(`unknown --timezone "${tz}" (an IANA name like Europe/Berlin)`, Exit.badInput);
  }
  return tz;
}

/** "every 1h" / "cron 0 3 * * *" for humans, from the spec the server describes. */
export function describeSpec(spec: {
  intervals?: { every: number | string }[];
  /** As the server describes them (CalendarSpecDescription); a spec we build has none. */
  calendars?: readonly unknown[];
  cronExpressions?: string[];
  timezone?: string;
  jitter?: number | string;
}): string {
  const parts: string[] = [];
  for (const i of spec.intervals ?? []) parts.push(`every ${formatDuration(Number(i.every))}`);
  // The server keeps a cron expression as a calendar: shown as the cron it stands for.
  const crons = [...(spec.cronExpressions ?? []), ...(spec.calendars ?? []).map((c) => cronOf(c as CalendarLike))];
  const jitter = Number(spec.jitter ?? 0);
  const window = crons.length === 1 && !parts.length ? dailyWindowOf(crons[0]!, jitter) : undefined;
  if (window) parts.push(window);
  else {
    for (const c of crons) parts.push(`cron ${c}`);
    if (jitter > 0) parts.push(`spread over ${formatDuration(jitter)}`);
  }
  const text = parts.join(', ') || 'no spec';
  return spec.timezone ? `${text} (${spec.timezone})` : text;
}

/** `--window`'s own spelling back, for the spec it made: a daily cron and a jitter of whole minutes under a day. */
function dailyWindowOf(cron: string, jitterMs: number): string | undefined {
  const m = /^([0-9]{1,2}) ([0-9]{1,2}) \* \* \*$/.exec(cron);
  if (!m || jitterMs <= 0 || jitterMs % 60_000 || jitterMs >= 86_400_000) return undefined;
  const start = Number(m[2]) * 60 + Number(m[1]);
  const end = (start + jitterMs / 60_000) % 1440;
  const hhmm = (t: number) => `${String(Math.floor(t / 60)).padStart(2, '0')}:${String(t % 60).padStart(2, '0')}`;
  return `daily in ${hhmm(start)}-${hhmm(end)}`;
}

type Range = { start: number | string; end?: number | string; step?: number };
export interface CalendarLike {
  second?: Range[];
  minute?: Range[];
  hour?: Range[];
  dayOfMonth?: Range[];
  month?: Range[];
  year?: Range[];
  dayOfWeek?: Range[];
}

const MONTHS = ['JANUARY', 'FEBRUARY', 'MARCH', 'APRIL', 'MAY', 'JUNE', 'JULY', 'AUGUST', 'SEPTEMBER', 'OCTOBER', 'NOVEMBER', 'DECEMBER'];
const DAYS = ['SUNDAY', 'MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY'];

/** A described calendar as five cron fields (six with seconds other than 0, a year when set). */
export function cronOf(c: CalendarLike): string {
  const fields = [
    field(c.minute, 0, 59),
    field(c.hour, 0, 23),
    field(c.dayOfMonth, 1, 31),
    field(c.month, 1, 12, MONTHS),
    field(c.dayOfWeek, 0, 6, DAYS),
  ];
  const second = field(c.second, 0, 59);
  const year = c.year?.length ? field(c.year, Number.NaN, Number.NaN) : undefined;
  return [...(second === '0' ? [] : [second]), ...fields, ...(year ? [year] : [])].join(' ');
}

function field(ranges: Range[] | undefined, min: number, max: number, names?: string[]): string {
  if (!ranges?.length) return '*';
  const num = (v: number | string) => (typeof v === 'number' ? v : names!.indexOf(v) + (names === MONTHS ? 1 : 0));
  const text = (v: number) => (names ? names[names === MONTHS ? v - 1 : v]!.slice(0, 3) : String(v));
  return ranges
    .map((r) => {
      const a = num(r.start);
      const b = r.end === undefined ? a : Math.max(a, num(r.end));
      const step = r.step && r.step > 1 ? `/${r.step}` : '';
      if (a === min && b === max) return `*${step}`;
      return a === b ? text(a) : `${text(a)}-${text(b)}${step}`;
    })
    .join(',');
}
