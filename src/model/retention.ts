import { z } from 'zod';

/*
 * Which of a schedule's images to keep. Pure and synchronous, like the snapshot plan: the
 * retention activity computes the whole plan before it removes anything, so a failure half-way
 * never leaves a decision made on partial data.
 */

export const RetentionPolicySchema = z
  .strictObject({
    /** Keep the N newest complete snapshots. */
    keepLast: z.number().int('keepLast must be an integer').min(1, 'keepLast must be >= 1').max(10_000).optional(),
    /** Keep the newest complete snapshot of each of the last D calendar days (UTC), today included. */
    keepDaily: z.number().int('keepDaily must be an integer').min(1, 'keepDaily must be >= 1').max(3_660).optional(),
  })
  .refine((p) => p.keepLast !== undefined || p.keepDaily !== undefined, 'set keepLast and/or keepDaily');

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

export interface RetentionPlan {
  /** Every image not pruned, newest run first. */
  keep: string[];
  /** Complete images of runs outside the policy, newest run first. */
  prune: string[];
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

/**
 * keep = keepLast newest complete runs ∪ the newest complete run of each of the last keepDaily
 * UTC days ∪ the newest complete run (a policy never leaves a schedule without a backup) ∪
 * `pinned` runs ∪ everything not complete, not datable or stamped after `now`. prune = the rest. Ties on time break
 * by run key, so the same input always gives the same plan.
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
  const keep = new Set<string>();

  for (const r of runs) {
    if (!r.complete || Number.isNaN(r.at) || r.at > nowMs || r.images.some((i) => pinned.has(i.name))) keep.add(r.key);
  }
  // Undatable or future-stamped runs (clock skew) are kept above and do not count for the policy.
  const complete = runs.filter((r) => r.complete && !Number.isNaN(r.at) && r.at <= nowMs);
  if (complete.length) keep.add(complete[0].key);
  for (const r of complete.slice(0, policy.keepLast ?? 0)) keep.add(r.key);
  if (policy.keepDaily) {
    const today = Math.floor(nowMs / DAY_MS);
    const seenDays = new Set<number>();
    for (const r of complete) {
      const day = Math.floor(r.at / DAY_MS);
      if (day > today - policy.keepDaily && !seenDays.has(day)) {
        seenDays.add(day);
        keep.add(r.key);
      }
    }
  }

  const out: RetentionPlan = { keep: [], prune: [] };
  for (const r of runs) for (const i of r.images) (keep.has(r.key) ? out.keep : out.prune).push(i.name);
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
