import { z } from 'zod';

/*
 * Which of a schedule's images to keep. Pure and synchronous, like the snapshot plan: the
 * retention activity computes the whole plan before it removes anything, so a failure half-way
 * never leaves a decision made on partial data.
 */

export const RetentionPolicySchema = z
  .strictObject({
    /** Keep the N newest complete snapshots. */
    keepLast: z.number().int('keepLast must be an integer').min(1, 'keepLast must be >= 1').max(10_000, 'keepLast must be <= 10000').optional(),
    /** Keep the newest complete snapshot of each of the last D calendar days (UTC), today included. */
    keepDaily: z.number().int('keepDaily must be an integer').min(1, 'keepDaily must be >= 1').max(3_660, 'keepDaily must be <= 3660').optional(),
    /** Keep the newest complete snapshot of each of the last W weeks (UTC, Monday to Sunday), this week included. */
    keepWeekly: z.number().int('keepWeekly must be an integer').min(1, 'keepWeekly must be >= 1').max(520, 'keepWeekly must be <= 520').optional(),
    /** Keep the newest complete snapshot of each of the last M calendar months (UTC), this month included. */
    keepMonthly: z.number().int('keepMonthly must be an integer').min(1, 'keepMonthly must be >= 1').max(1_200, 'keepMonthly must be <= 1200').optional(),
  })
  .refine(
    (p) => p.keepLast !== undefined || p.keepDaily !== undefined || p.keepWeekly !== undefined || p.keepMonthly !== undefined,
    'set at least one of keepLast, keepDaily, keepWeekly, keepMonthly',
  );

export type RetentionPolicy = z.infer<typeof RetentionPolicySchema>;

export interface RetentionImage {
  name: string;
  /** ISO-8601 time the image was created (vmsnap.created-at). */
  createdAt: string;
  /** vmsnap.state: only `complete` images are ever pruned. */
  state: string;
  /**
   * The run (workflow id) that made it. A multi-disk VM's run makes one image per disk; they are
   * kept or pruned together, so keepLast counts snapshots of the VM, not disk images. Default:
   * the image is a run of its own.
   */
  run?: string;
}

/**
 * Why a run is kept: a tier of the policy (`last`, `daily`, `weekly`, `monthly`), `newest` (the
 * newest complete run, whatever the policy), `pinned`, or a run the policy cannot judge
 * (`incomplete`, `undated`, `future`: stamped after now).
 */
export type KeepReason = 'last' | 'daily' | 'weekly' | 'monthly' | 'newest' | 'pinned' | 'incomplete' | 'undated' | 'future';

export interface RetentionPlan {
  /** Every image not pruned, newest run first. */
  keep: string[];
  /** Complete images of runs outside the policy, newest run first. */
  prune: string[];
  /** Each run, newest first, with why it is kept (no reason: pruned). */
  runs: { run: string; images: string[]; reasons: KeepReason[] }[];
}

export interface RetentionResult {
  kept: string[];
  pruned: string[];
  /** Outside the plan's control: in use (clones, extra snapshots) or gone mid-way. */
  skipped: { image: string; reason: string }[];
  /** Set when retention failed past its retries. The snapshot itself succeeded; the next run retries. */
  error?: string;
}

interface Run {
  key: string;
  images: RetentionImage[];
  /** Latest created-at of its images (ms), so the newest image is in the newest run; NaN when any is unreadable. */
  at: number;
  complete: boolean;
}

const DAY_MS = 86_400_000;

/** Calendar periods in UTC, numbered so that consecutive periods have consecutive numbers. */
const PERIOD = {
  daily: (ms: number) => Math.floor(ms / DAY_MS),
  // 1970-01-01 was a Thursday: shifting by 3 days makes every period start on a Monday.
  weekly: (ms: number) => Math.floor((Math.floor(ms / DAY_MS) + 3) / 7),
  monthly: (ms: number) => {
    const d = new Date(ms);
    return d.getUTCFullYear() * 12 + d.getUTCMonth();
  },
} as const;

const TIER_OF = { daily: 'keepDaily', weekly: 'keepWeekly', monthly: 'keepMonthly' } as const;

/**
 * keep = keepLast newest complete runs ∪ for each calendar tier (keepDaily days, keepWeekly weeks
 * from Monday, keepMonthly months; UTC; the current period included) the newest complete run of
 * each of its last N periods ∪ the newest complete run (a policy never leaves a schedule without
 * a backup) ∪ `pinned` runs ∪ everything not complete, not datable or stamped after `now`.
 * prune = the rest. Periods are counted back from now, not among the periods that have a run: a
 * run older than its tier's window is not kept by that tier however few runs there are. Ties on
 * time break by run key, so the same input always gives the same plan.
 */
export function planRetention(
  images: readonly RetentionImage[],
  policy: RetentionPolicy,
  now: Date | number,
  opts: { pinned?: readonly string[] } = {},
): RetentionPlan {
  const nowMs = typeof now === 'number' ? now : now.getTime();
  const pinned = new Set(opts.pinned ?? []);
  const runs = groupRuns(images);
  const reasons = new Map<string, KeepReason[]>(runs.map((r) => [r.key, []]));
  const why = (r: Run, reason: KeepReason) => reasons.get(r.key)!.push(reason);

  for (const r of runs) {
    if (!r.complete) why(r, 'incomplete');
    else if (Number.isNaN(r.at)) why(r, 'undated');
    else if (r.at > nowMs) why(r, 'future');
    if (r.images.some((i) => pinned.has(i.name))) why(r, 'pinned');
  }
  // Undatable or future-stamped runs (clock skew) are kept above and do not count for the policy.
  const complete = runs.filter((r) => r.complete && !Number.isNaN(r.at) && r.at <= nowMs);
  for (const r of complete.slice(0, policy.keepLast ?? 0)) why(r, 'last');
  for (const tier of ['daily', 'weekly', 'monthly'] as const) {
    const count = policy[TIER_OF[tier]];
    if (!count) continue;
    const period = PERIOD[tier];
    const current = period(nowMs);
    const seen = new Set<number>();
    for (const r of complete) {
      const p = period(r.at);
      if (p > current - count && !seen.has(p)) {
        seen.add(p);
        why(r, tier);
      }
    }
  }
  if (complete.length) why(complete[0], 'newest');

  const out: RetentionPlan = { keep: [], prune: [], runs: [] };
  for (const r of runs) {
    const names = r.images.map((i) => i.name);
    const kept = reasons.get(r.key)!;
    (kept.length ? out.keep : out.prune).push(...names);
    out.runs.push({ run: r.key, images: names, reasons: kept });
  }
  return out;
}

/** Runs newest first (unreadable times count as newest: never pruned, listed first). */
function groupRuns(images: readonly RetentionImage[]): Run[] {
  const byKey = new Map<string, RetentionImage[]>();
  for (const i of images) {
    const key = i.run ?? `image:${i.name}`;
    const list = byKey.get(key) ?? [];
    if (!list.some((x) => x.name === i.name)) list.push(i);
    byKey.set(key, list);
  }
  const runs: Run[] = [];
  for (const [key, list] of byKey) {
    list.sort((a, b) => cmp(a.name, b.name));
    const times = list.map((i) => parseTime(i.createdAt));
    const at = times.some(Number.isNaN) ? NaN : Math.max(...times);
    runs.push({ key, images: list, at, complete: list.every((i) => i.state === 'complete') });
  }
  return runs.sort((a, b) => {
    const ta = Number.isNaN(a.at) ? Infinity : a.at;
    const tb = Number.isNaN(b.at) ? Infinity : b.at;
    return tb - ta || cmp(a.key, b.key);
  });
}

function parseTime(s: string): number {
  // Strict ISO-8601 with a zone: Date.parse accepts local-time forms whose meaning depends on the host.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(s)) return NaN;
  return Date.parse(s);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
