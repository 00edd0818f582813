import { RetentionPolicySchema } from '../model/retention';
import type { RetentionPolicy } from '../model/retention';
import { CliError, Exit } from './exit-codes';
import type { Values } from './options';
import type { KEEP } from './specs/retention';

const TIERS = [
  ['keep-last', 'keepLast'],
  ['keep-daily', 'keepDaily'],
  ['keep-weekly', 'keepWeekly'],
  ['keep-monthly', 'keepMonthly'],
] as const;

/** The --keep-… flags as a policy, checked by the policy's own schema; undefined when none is given. */
export function retentionFrom(v: Values<typeof KEEP>): RetentionPolicy | undefined {
  const policy: Record<string, number> = {};
  for (const [flag, key] of TIERS) {
    const s = v[flag];
    if (s === undefined) continue;
    if (!/^[1-9][0-9]{0,5}$/.test(s)) throw new CliError(`--${flag} expects a positive integer, got "${s}"`, Exit.badInput);
    policy[key] = Number(s);
  }
  if (!Object.keys(policy).length) return undefined;
  const r = RetentionPolicySchema.safeParse(policy);
  if (r.success) return r.data;
  // The schema speaks of its fields (keepMonthly must be <= 1200); the operator typed flags.
  const said = r.error.issues.map((i) => TIERS.reduce((m, [flag, key]) => m.replace(key, `--${flag}`), i.message));
  throw new CliError(`invalid retention: ${said.join('; ')}`, Exit.badInput, 'InvalidInput');
}

/** `keep-last 7 + keep-weekly 4`, the flags' own words. */
export function retentionText(r: RetentionPolicy): string {
  return TIERS.flatMap(([flag, key]) => (r[key] ? [`${flag} ${r[key]}`] : [])).join(' + ');
}
