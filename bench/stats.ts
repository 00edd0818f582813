/** Order statistics for benchmark samples (linear interpolation between closest ranks). */

export interface Summary {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
}

export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

export function summarize(xs: readonly number[]): Summary {
  const n = xs.length;
  return {
    n,
    p50: quantile(xs, 0.5),
    p95: quantile(xs, 0.95),
    p99: quantile(xs, 0.99),
    max: n ? Math.max(...xs) : Number.NaN,
    min: n ? Math.min(...xs) : Number.NaN,
    mean: n ? xs.reduce((a, b) => a + b, 0) / n : Number.NaN,
  };
}

export function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

export function fmt(x: number | undefined, digits = 1): string {
  return x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(digits);
}
