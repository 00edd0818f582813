import type { OptionTable } from '../options';

/** The retention tiers: `schedule create`, `schedule update` and `prune` take them. */
export const KEEP = {
  'keep-last': { type: 'string', arg: 'N', help: 'keep the N newest image sets' },
  'keep-daily': { type: 'string', arg: 'D', help: 'keep the newest set of each of the last D days (UTC), today included' },
  'keep-weekly': { type: 'string', arg: 'W', help: 'keep the newest set of each of the last W weeks (UTC, from Monday), this week included' },
  'keep-monthly': { type: 'string', arg: 'M', help: 'keep the newest set of each of the last M calendar months (UTC), this month included' },
} as const satisfies OptionTable;
