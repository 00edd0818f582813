/*
 * The one duration syntax of the CLI: `500ms`, `90s`, `30m`, `1h30m`, `2d`. Every duration flag
 * goes through parseDuration, so `--freeze-deadline 10s` and `--every 1h30m` read alike. The flags
 * that used to take plain numbers (`--freeze-deadline-ms 10000`, `--agent-timeout-s 5`) keep
 * working: their rule names the unit a bare number is in.
 */

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000, ms: 1 } as const;
type Unit = keyof typeof UNIT_MS;
/** Largest first: a term may only follow a larger one (`1h30m`, never `30m1h`). */
const ORDER: readonly Unit[] = ['d', 'h', 'm', 's', 'ms'];
const TERM = /([0-9]+)(ms|d|h|m|s)/y;

export interface DurationRule {
  /** The unit of a bare number (`10000`): only the old `-ms`/`-s` flags have one; others refuse it. */
  bare?: 'ms' | 's';
  min?: number;
  max?: number;
  /** The value must be a whole multiple of this many ms (1000 for a field kept in seconds). */
  step?: number;
}

export class DurationError extends Error {
  override readonly name = 'DurationError';
}

/** Milliseconds, or a DurationError saying what is wrong with `text`. */
export function parseDuration(text: string, rule: DurationRule = {}): number {
  const ms = /^[0-9]+$/.test(text) && rule.bare ? Number(text) * UNIT_MS[rule.bare] : terms(text);
  if (!Number.isSafeInteger(ms)) throw new DurationError(`"${text}" is too long a duration`);
  if (rule.min !== undefined && ms < rule.min) throw new DurationError(`must be at least ${formatDuration(rule.min)}, got "${text}"`);
  if (rule.max !== undefined && ms > rule.max) throw new DurationError(`must be at most ${formatDuration(rule.max)}, got "${text}"`);
  if (rule.step && ms % rule.step !== 0) throw new DurationError(`must be whole ${formatDuration(rule.step)} steps, got "${text}"`);
  return ms;
}

function terms(text: string): number {
  const bad = () => new DurationError(`expects a duration like 500ms, 90s, 30m, 1h30m or 1d, got "${text}"`);
  if (!text) throw bad();
  let total = 0;
  let last = -1;
  TERM.lastIndex = 0;
  while (TERM.lastIndex < text.length) {
    const m = TERM.exec(text);
    if (!m) throw bad();
    const rank = ORDER.indexOf(m[2] as Unit);
    if (rank <= last) throw bad(); // repeated or out of order: `1h1h`, `30m1h`
    last = rank;
    total += Number(m[1]) * UNIT_MS[m[2] as Unit];
  }
  return total;
}

/** The shortest text parseDuration reads back as `ms`: 5400000 → `1h30m`, 1500 → `1s500ms`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const u of ORDER) {
    const n = Math.floor(rest / UNIT_MS[u]);
    if (n > 0) {
      out += `${n}${u}`;
      rest -= n * UNIT_MS[u];
    }
  }
  return out;
}
