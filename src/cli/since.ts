import { DurationError, parseDuration } from './durations';
import { CliError, Exit } from './exit-codes';

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * `--since`: a duration back from `now` (24h, 7d), a UTC date (2026-12-01) or a time with its
 * zone (2026-12-01T03:00:00Z); epoch ms. A time without a zone is refused: its meaning would
 * depend on the host.
 */
export function parseSince(text: string, now: number): number {
  try {
    return now - parseDuration(text);
  } catch (err) {
    if (!(err instanceof DurationError)) throw err;
  }
  const d = DATE.exec(text);
  const ms = d ? Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3])) : TIME.test(text) ? Date.parse(text) : NaN;
  const valid = d ? new Date(ms).toISOString().slice(0, 10) === text : !Number.isNaN(ms);
  if (!valid) throw new CliError(`--since expects a duration (24h, 7d) or a UTC date or time (2026-12-01, 2026-12-01T03:00:00Z), got "${text}"`, Exit.badInput);
  return ms;
}
