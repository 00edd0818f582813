import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RetentionPolicySchema, planRetention } from '../../src/model/retention';
import type { KeepReason, RetentionImage, RetentionPlan, RetentionPolicy } from '../../src/model/retention';
import { parseSnapshotInput } from '../../src/model/input';

const NOW = Date.parse('2025-06-15T12:00:00Z');
const img = (name: string, createdAt: string, state = 'complete', run?: string): RetentionImage => ({
  name,
  createdAt,
  state,
  ...(run ? { run } : {}),
});
const keepPrune = (p: RetentionPlan) => ({ keep: p.keep, prune: p.prune });
const hourly = (n: number, from = NOW): RetentionImage[] =>
  Array.from({ length: n }, (_, i) => img(`a${String(i).padStart(3, '0')}`, new Date(from - i * 3600_000).toISOString()));

describe('retention policy schema', () => {
  it('accepts any non-empty combination of keepLast, keepDaily, keepWeekly, keepMonthly', () => {
    for (const p of [{ keepLast: 1 }, { keepDaily: 7 }, { keepLast: 3, keepDaily: 30 }, { keepWeekly: 4 }, { keepMonthly: 12 }, { keepLast: 2, keepWeekly: 3, keepMonthly: 6 }]) {
      expect(RetentionPolicySchema.safeParse(p).success, JSON.stringify(p)).toBe(true);
    }
  });

  it.each([[{}], [{ keepLast: 0 }], [{ keepLast: 1.5 }], [{ keepDaily: -1 }], [{ keepWeekly: 0 }], [{ keepMonthly: 1201 }], [{ keepLast: 2, keepYearly: 3 }], [{ keepLast: '2' }]])(
    'rejects %j',
    (p) => {
      expect(RetentionPolicySchema.safeParse(p).success).toBe(false);
    },
  );

  it('is part of the workflow input, and only with a schedule label to scope it', () => {
    expect(parseSnapshotInput({ domain: 'vm-42', labels: { schedule: 's1' }, retention: { keepLast: 2 } }).ok).toBe(true);
    const r = parseSnapshotInput({ domain: 'vm-42', retention: { keepLast: 2 } });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toMatch(/retention.*labels\.schedule/);
    const snapOnly = parseSnapshotInput({ domain: 'vm-42', labels: { schedule: 's1' }, retention: { keepLast: 2 }, target: { clone: false } });
    expect(!snapOnly.ok && snapOnly.message).toMatch(/retention.*clone/);
    expect(parseSnapshotInput({ domain: 'vm-42', labels: { schedule: 's1' }, retention: {} }).ok).toBe(false);
  });
});

describe('planRetention', () => {
  it('keepLast keeps the N newest complete images and prunes the rest', () => {
    const p = planRetention(hourly(5), { keepLast: 2 }, NOW);
    expect(p.keep).toEqual(['a000', 'a001']);
    expect(p.prune).toEqual(['a002', 'a003', 'a004']);
  });

  it('keepDaily keeps the newest image of each of the last D UTC days, today included', () => {
    const images = [
      img('today-late', '2025-06-15T11:00:00Z'),
      img('today-early', '2025-06-15T00:30:00Z'),
      img('yday-late', '2025-06-14T23:59:59Z'),
      img('yday-early', '2025-06-14T01:00:00Z'),
      img('2days', '2025-06-13T10:00:00Z'),
      img('3days', '2025-06-12T10:00:00Z'),
    ];
    expect(keepPrune(planRetention(images, { keepDaily: 3 }, NOW))).toEqual({
      keep: ['today-late', 'yday-late', '2days'],
      prune: ['today-early', 'yday-early', '3days'],
    });
  });

  it('uses UTC days regardless of the offset an image was stamped with', () => {
    // 2025-06-15T01:00+02:00 is 2025-06-14T23:00Z: yesterday in UTC.
    const images = [img('today', '2025-06-15T10:00:00Z'), img('yday', '2025-06-15T01:00:00+02:00'), img('yday-old', '2025-06-14T05:00:00Z')];
    expect(planRetention(images, { keepDaily: 2 }, NOW).prune).toEqual(['yday-old']);
  });

  it('keeps the union of keepLast and keepDaily', () => {
    const images = [...hourly(3), img('old-day', '2025-06-14T08:00:00Z'), img('older-day', '2025-06-13T08:00:00Z')];
    const p = planRetention(images, { keepLast: 1, keepDaily: 2 }, NOW);
    expect(p.keep).toEqual(['a000', 'old-day']);
    expect(p.prune).toEqual(['a001', 'a002', 'older-day']);
  });

  it('never prunes an image that is not complete', () => {
    const images = [img('new', '2025-06-15T11:00:00Z'), img('half', '2025-06-10T00:00:00Z', 'cloned'), img('flat', '2025-06-09T00:00:00Z', 'flattening')];
    expect(keepPrune(planRetention(images, { keepLast: 1 }, NOW))).toEqual({ keep: ['new', 'half', 'flat'], prune: [] });
  });

  it('does not count incomplete images toward keepLast', () => {
    const images = [img('running', '2025-06-15T11:59:30Z', 'cloned'), ...hourly(3, NOW - 60_000)];
    const p = planRetention(images, { keepLast: 2 }, NOW);
    expect(p.keep).toEqual(['running', 'a000', 'a001']);
    expect(p.prune).toEqual(['a002']);
  });

  it('always keeps the newest complete image, even when keepDaily finds nothing recent', () => {
    const images = [img('last-week', '2025-06-08T10:00:00Z'), img('before', '2025-06-07T10:00:00Z')];
    expect(keepPrune(planRetention(images, { keepDaily: 1 }, NOW))).toEqual({ keep: ['last-week'], prune: ['before'] });
  });

  it('keeps pinned images (this run’s) and images it cannot date or that are from the future', () => {
    const images = [...hourly(3), img('bad-date', 'yesterday'), img('local-time', '2025-06-01T10:00:00'), img('future', '2025-06-16T00:00:00Z')];
    const p = planRetention(images, { keepLast: 1 }, NOW, { pinned: ['a002'] });
    expect(p.prune).toEqual(['a001']);
    expect(p.keep.sort()).toEqual(['a000', 'a002', 'bad-date', 'future', 'local-time']);
  });

  it('keeps or prunes a multi-disk run as a whole, counting runs for keepLast', () => {
    const run = (wf: string, at: string, state = 'complete') =>
      ['vda', 'vdb', 'vdc'].map((d) => img(`vm-${d}-${wf}`, at, state, wf));
    const images = [...run('r3', '2025-06-15T11:00:00Z'), ...run('r2', '2025-06-15T10:00:00Z'), ...run('r1', '2025-06-15T09:00:00Z')];
    const p = planRetention(images, { keepLast: 2 }, NOW);
    expect(p.prune).toEqual(['vm-vda-r1', 'vm-vdb-r1', 'vm-vdc-r1']);
    // one disk of a run unfinished: the whole run is kept
    images[6] = img('vm-vda-r1', '2025-06-15T09:00:00Z', 'cloned', 'r1');
    expect(planRetention(images, { keepLast: 2 }, NOW).prune).toEqual([]);
  });

  it('does not depend on input order (ties broken by name)', () => {
    const same = '2025-06-15T10:00:00Z';
    const images = [img('b', same), img('a', same), img('c', same)];
    const p1 = planRetention(images, { keepLast: 1 }, NOW);
    const p2 = planRetention([...images].reverse(), { keepLast: 1 }, NOW);
    expect(p1).toEqual(p2);
    expect(p1.keep).toEqual(['a']);
  });
});

describe('planRetention: weekly and monthly tiers', () => {
  // NOW (2025-06-15) is a Sunday: this week is Monday 06-09 to Sunday 06-15, in UTC.
  it('keepWeekly keeps the newest set of each of the last W weeks, weeks starting on Monday 00:00 UTC', () => {
    const images = [
      img('sun-now', '2025-06-15T11:00:00Z'),
      img('mon-this', '2025-06-09T00:00:00Z'),
      img('sun-prev', '2025-06-08T23:59:59Z'),
      img('mon-prev', '2025-06-02T00:00:00Z'),
      img('two-back', '2025-05-26T10:00:00Z'),
      img('three-back', '2025-05-19T10:00:00Z'),
    ];
    expect(keepPrune(planRetention(images, { keepWeekly: 3 }, NOW))).toEqual({
      keep: ['sun-now', 'sun-prev', 'two-back'],
      prune: ['mon-this', 'mon-prev', 'three-back'],
    });
  });

  it('counts weeks across a year boundary', () => {
    const now = Date.parse('2025-01-02T12:00:00Z'); // a Thursday: its week began Monday 2024-12-30
    const images = [img('this-week', '2024-12-30T08:00:00Z'), img('last-sunday', '2024-12-29T20:00:00Z'), img('week-before', '2024-12-22T20:00:00Z')];
    expect(keepPrune(planRetention(images, { keepWeekly: 1 }, now))).toEqual({ keep: ['this-week'], prune: ['last-sunday', 'week-before'] });
    expect(keepPrune(planRetention(images, { keepWeekly: 2 }, now))).toEqual({ keep: ['this-week', 'last-sunday'], prune: ['week-before'] });
  });

  it('keepMonthly keeps the newest set of each of the last M calendar months (UTC)', () => {
    const images = [
      img('jun-1st', '2025-06-01T00:00:00Z'),
      img('may-last', '2025-05-31T23:59:59Z'),
      img('may-first', '2025-05-01T00:00:00Z'),
      img('apr', '2025-04-30T12:00:00Z'),
      img('mar', '2025-03-15T12:00:00Z'),
    ];
    expect(keepPrune(planRetention(images, { keepMonthly: 3 }, NOW))).toEqual({ keep: ['jun-1st', 'may-last', 'apr'], prune: ['may-first', 'mar'] });
  });

  it('knows February 29 and the offset an image was stamped with', () => {
    const now = Date.parse('2024-03-10T12:00:00Z');
    // 2024-03-01T00:30+01:00 is 2024-02-29T23:30Z: February in UTC.
    const images = [img('mar', '2024-03-02T00:30:00Z'), img('feb-29', '2024-03-01T00:30:00+01:00'), img('feb-1st', '2024-02-01T00:00:00Z'), img('jan', '2024-01-31T23:00:00Z')];
    expect(keepPrune(planRetention(images, { keepMonthly: 2 }, now))).toEqual({ keep: ['mar', 'feb-29'], prune: ['feb-1st', 'jan'] });
  });

  it('says why each set is kept, like restic forget --dry-run', () => {
    const images = [img('a', '2025-06-15T10:00:00Z'), img('b', '2025-06-14T10:00:00Z'), img('c', '2025-06-02T10:00:00Z'), img('d', '2025-05-31T10:00:00Z'), img('e', '2025-05-30T10:00:00Z'), img('f', '2025-06-10T10:00:00Z', 'cloned')];
    const plan = planRetention(images, { keepLast: 2, keepWeekly: 2, keepMonthly: 2 }, NOW);
    const reasons = Object.fromEntries(plan.runs.map((r) => [r.images[0], r.reasons]));
    expect(reasons).toEqual<Record<string, KeepReason[]>>({
      a: ['last', 'weekly', 'monthly', 'newest'],
      b: ['last'],
      f: ['incomplete'],
      c: ['weekly'],
      d: ['monthly'],
      e: [],
    });
    expect(plan.prune).toEqual(['e']);
  });
});

describe('planRetention properties', () => {
  const arbImages: fc.Arbitrary<RetentionImage[]> = fc
    .uniqueArray(
      fc.record({
        name: fc.stringMatching(/^[a-z0-9]{1,8}$/),
        createdAt: fc.oneof(
          { weight: 9, arbitrary: fc.integer({ min: NOW - 40 * 86_400_000, max: NOW }).map((t) => new Date(t).toISOString()) },
          { weight: 1, arbitrary: fc.constantFrom('garbage', '2025-01-01', new Date(NOW + 3_600_000).toISOString()) },
        ),
        state: fc.constantFrom('complete', 'complete', 'complete', 'cloned', 'flattening'),
        run: fc.option(fc.constantFrom('r1', 'r2', 'r3', 'r4'), { nil: undefined }),
      }),
      { selector: (i) => i.name, maxLength: 40 },
    )
    .map((list) => list.map((i): RetentionImage => (i.run === undefined ? { name: i.name, createdAt: i.createdAt, state: i.state } : { ...i, run: i.run })));
  const arbPolicy: fc.Arbitrary<RetentionPolicy> = fc
    .record({ keepLast: fc.option(fc.integer({ min: 1, max: 10 }), { nil: undefined }), keepDaily: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }) })
    .filter((p) => p.keepLast !== undefined || p.keepDaily !== undefined)
    .map((p) => JSON.parse(JSON.stringify(p)) as RetentionPolicy);

  const arbTiered: fc.Arbitrary<RetentionPolicy> = fc
    .record({
      keepLast: fc.option(fc.integer({ min: 1, max: 10 }), { nil: undefined }),
      keepDaily: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
      keepWeekly: fc.option(fc.integer({ min: 1, max: 60 }), { nil: undefined }),
      keepMonthly: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
    })
    .filter((p) => Object.values(p).some((v) => v !== undefined))
    .map((p) => JSON.parse(JSON.stringify(p)) as RetentionPolicy);
  /** Two years of complete, dated runs, one image each: the calendar tiers' own ground. */
  const arbYears = fc
    .uniqueArray(fc.integer({ min: NOW - 800 * 86_400_000, max: NOW }), { maxLength: 60 })
    .map((ts) => ts.map((t, i) => img(`r${i}`, new Date(t).toISOString())));

  // An oracle written differently from planRetention: calendar arithmetic on Date fields.
  const mondayOf = (ms: number) => {
    const d = new Date(ms);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
  };
  const weeksBack = (ms: number, now: number) => Math.round((mondayOf(now) - mondayOf(ms)) / (7 * 86_400_000));
  const monthsBack = (ms: number, now: number) => {
    const a = new Date(ms);
    const b = new Date(now);
    return (b.getUTCFullYear() - a.getUTCFullYear()) * 12 + b.getUTCMonth() - a.getUTCMonth();
  };

  it.each([
    ['weekly', 'keepWeekly', weeksBack],
    ['monthly', 'keepMonthly', monthsBack],
  ] as const)('%s: exactly the newest set of each of the last N periods has that reason', (reason, key, back) => {
    fc.assert(
      fc.property(arbYears, fc.integer({ min: 1, max: 40 }), (images, n) => {
        const plan = planRetention(images, { [key]: n }, NOW);
        const at = new Map(images.map((i) => [i.name, Date.parse(i.createdAt)]));
        const newestOf = new Map<number, string>();
        for (const i of images) {
          const p = back(at.get(i.name)!, NOW);
          const cur = newestOf.get(p);
          if (p < n && (cur === undefined || at.get(i.name)! > at.get(cur)!)) newestOf.set(p, i.name);
        }
        const tagged = plan.runs.filter((r) => r.reasons.includes(reason)).map((r) => r.images[0]).sort();
        expect(tagged).toEqual([...newestOf.values()].sort());
      }),
    );
  });

  it('each tier keeps on its own: the plan of a policy keeps the union of its tiers’ plans', () => {
    fc.assert(
      fc.property(arbImages, arbTiered, (images, policy) => {
        const tiers = Object.entries(policy).map(([k, v]) => ({ [k]: v }) as RetentionPolicy);
        const union = new Set(tiers.flatMap((t) => planRetention(images, t, NOW).keep));
        expect(new Set(planRetention(images, policy, NOW).keep)).toEqual(union);
      }),
    );
  });

  it('a longer window never removes what a shorter one keeps', () => {
    fc.assert(
      fc.property(arbYears, fc.constantFrom('keepDaily', 'keepWeekly', 'keepMonthly'), fc.integer({ min: 1, max: 30 }), fc.integer({ min: 0, max: 30 }), (images, key, n, more) => {
        const kept = new Set(planRetention(images, { [key]: n + more }, NOW).keep);
        for (const k of planRetention(images, { [key]: n }, NOW).keep) expect(kept.has(k)).toBe(true);
      }),
    );
  });

  it('a set is kept exactly when it has a reason', () => {
    fc.assert(
      fc.property(arbImages, arbTiered, (images, policy) => {
        const plan = planRetention(images, policy, NOW);
        const kept = new Set(plan.keep);
        for (const r of plan.runs) for (const i of r.images) expect(kept.has(i)).toBe(r.reasons.length > 0);
      }),
    );
  });

  it('partitions the input: keep ∩ prune = ∅ and keep ∪ prune = all', () => {
    fc.assert(
      fc.property(arbImages, arbPolicy, (images, policy) => {
        const p = planRetention(images, policy, NOW);
        const keep = new Set(p.keep);
        expect(p.prune.filter((n) => keep.has(n))).toEqual([]);
        expect([...p.keep, ...p.prune].sort()).toEqual(images.map((i) => i.name).sort());
      }),
    );
  });

  it('only ever prunes complete images', () => {
    fc.assert(
      fc.property(arbImages, arbPolicy, (images, policy) => {
        const state = new Map(images.map((i) => [i.name, i.state]));
        for (const n of planRetention(images, policy, NOW).prune) expect(state.get(n)).toBe('complete');
      }),
    );
  });

  it('never prunes the newest complete image', () => {
    fc.assert(
      fc.property(arbImages, arbPolicy, (images, policy) => {
        const dated = images.filter((i) => i.state === 'complete' && /Z$/.test(i.createdAt) && Date.parse(i.createdAt) <= NOW);
        if (!dated.length) return;
        const newest = Math.max(...dated.map((i) => Date.parse(i.createdAt)));
        const pruned = new Set(planRetention(images, policy, NOW).prune);
        expect(dated.filter((i) => Date.parse(i.createdAt) === newest).some((i) => !pruned.has(i.name))).toBe(true);
      }),
    );
  });

  it('keeps at least min(keepLast, complete runs) runs and never prunes a pinned image', () => {
    fc.assert(
      fc.property(arbImages, fc.integer({ min: 1, max: 10 }), fc.nat(), (images, keepLast, pick) => {
        const pinned = images.length ? [images[pick % images.length].name] : [];
        const p = planRetention(images, { keepLast }, NOW, { pinned });
        expect(p.prune).not.toContain(pinned[0]);
        const runOf = (n: string) => images.find((i) => i.name === n)!.run ?? n;
        const runs = new Set(images.map((i) => runOf(i.name)));
        const completeRuns = [...runs].filter((r) => images.every((i) => runOf(i.name) !== r || i.state === 'complete'));
        const keptComplete = new Set(p.keep.map(runOf).filter((r) => completeRuns.includes(r)));
        expect(keptComplete.size).toBeGreaterThanOrEqual(Math.min(keepLast, completeRuns.length));
      }),
    );
  });

  it('is deterministic and independent of input order', () => {
    fc.assert(
      fc.property(arbImages, arbPolicy, fc.integer(), (images, policy, seed) => {
        const shuffled = [...images].sort((a, b) => ((hash(a.name, seed) - hash(b.name, seed)) | 0));
        expect(planRetention(shuffled, policy, NOW)).toEqual(planRetention(images, policy, NOW));
      }),
    );
  });
});

function hash(s: string, seed: number): number {
  let h = seed | 0;
  for (const c of s) h = (Math.imul(h, 31) + c.charCodeAt(0)) | 0;
  return h;
}
