/**
 * The metric names a PromQL expression selects (Grafana's `$variables` allowed), without a PromQL
 * parser: strings, label matchers, ranges and grouping lists are cut out first, then every
 * identifier left that is not a function call, a keyword or part of a number is a metric name.
 */
const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan', 'start', 'end']);

export function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ');
  const names = new Set<string>();
  for (const m of s.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const before = s[m.index - 1] ?? ' ';
    if (/[0-9.]/.test(before)) continue; // 1e3, 30s, 0x10
    if (/^\s*\(/.test(s.slice(m.index + m[0].length))) continue; // sum(, rate(, time(
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}

/**
 * The exposition family a selected name belongs to: a histogram's `_bucket`, `_sum` and `_count`
 * series are its family's; every other name is its own family.
 */
export function familyOf(name: string, histograms: ReadonlySet<string>): string {
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return m && histograms.has(m[1]!) ? m[1]! : name;
}
