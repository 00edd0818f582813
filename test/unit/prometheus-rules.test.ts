import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { hostMetrics } from '../../src/host/metrics';
import { parseExposition } from '../helpers/exposition';
import { asList, asMap, parseYaml } from '../helpers/mini-yaml';
import type { Yaml } from '../helpers/mini-yaml';
import { familyOf, metricNames } from '../helpers/promql-names';
import { panelQueries } from '../../support/lab/dashboard-page';
import type { GrafanaDashboard } from '../../support/lab/dashboard-page';

/*
 * What ships in deploy/prometheus/ and deploy/grafana/: promtool checks the rules and runs their
 * unit tests (deploy/prometheus/tests/, every alert firing and staying quiet), and every rule and
 * dashboard query selects only metric families a worker's registry really exposes, so renaming a
 * metric without its rules and dashboard fails here. The real Prometheus against a lab worker:
 * test/integration/prometheus-alerts.test.ts.
 */

const ROOT = path.resolve(__dirname, '../..');
const RULES = path.join(ROOT, 'deploy/prometheus/vmsnap-alerts.yml');
const TESTS_DIR = path.join(ROOT, 'deploy/prometheus/tests');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/vmsnap-dashboard.json');
const OPERATIONS = path.join(ROOT, 'docs/operations.md');
// lab/deps.sh installs Debian's prometheus package, which carries promtool.
const PROMTOOL = process.env.PROMTOOL ?? 'promtool';
const run = promisify(execFile);
const scratch: string[] = [];

afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

function rulesOf(file: string): Rule[] {
  const doc = asMap(parseYaml(readFileSync(file, 'utf8')), file);
  return asList(doc.groups, 'groups').flatMap((g) => asList(asMap(g, 'group').rules, 'rules').map((r) => asMap(r, 'rule') as unknown as Rule));
}

const fixtures = () =>
  readdirSync(TESTS_DIR)
    .filter((f) => f.endsWith('.yml'))
    .map((f) => path.join(TESTS_DIR, f));

/** promtool's verdict; never throws on its exit code. */
async function promtool(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await run(PROMTOOL, args, { timeout: 60_000 });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string; message: string };
    if (e.code === 'ENOENT') throw new Error(`${PROMTOOL} not found: bash lab/deps.sh installs Debian's prometheus package, which has it`, { cause: err });
    return { code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` || e.message };
  }
}

/** The families a host worker's /metrics exposes, and which of them are histograms. */
async function exposed(): Promise<{ names: Set<string>; histograms: Set<string> }> {
  const families = parseExposition(await hostMetrics().render());
  return { names: new Set(families.map((f) => f.name)), histograms: new Set(families.filter((f) => f.type === 'histogram').map((f) => f.name)) };
}

/** Names an expression selects that are neither exposed nor in `extra`. */
function unknownNames(expr: string, families: { names: Set<string>; histograms: Set<string> }, extra: string[] = []): string[] {
  return metricNames(expr).filter((n) => !families.names.has(familyOf(n, families.histograms)) && !extra.includes(n));
}

/** GitHub's anchor of a markdown heading. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

describe('deploy/prometheus: the alert rules', () => {
  const rules = rulesOf(RULES);
  const alerts = rules.filter((r) => r.alert);

  it('promtool check rules accepts them, and counts as many rules as this test reads', async () => {
    const r = await promtool('check', 'rules', RULES);
    expect(r.out).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(r.code).toBe(0);
  });

  it('promtool test rules: every fixture in deploy/prometheus/tests passes', async () => {
    const r = await promtool('test', 'rules', ...fixtures());
    expect(r.out, r.out).not.toMatch(/FAILED/);
    expect(r.code, r.out).toBe(0);
    expect(r.out.match(/SUCCESS/g)).toHaveLength(fixtures().length);
  });

  it('the same checks fail on a broken rule: a syntax error, and a `for` the fixtures do not expect', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-rules-'));
    scratch.push(dir);
    cpSync(TESTS_DIR, path.join(dir, 'tests'), { recursive: true });
    const text = readFileSync(RULES, 'utf8');
    const broken = path.join(dir, 'vmsnap-alerts.yml');

    writeFileSync(broken, text.replace('vmsnap_oldest_freeze_age_seconds > vmsnap_oldest_freeze_deadline_seconds', 'vmsnap_oldest_freeze_age_seconds >> vmsnap_oldest_freeze_deadline_seconds'));
    const check = await promtool('check', 'rules', broken);
    expect(check.code).not.toBe(0);
    expect(check.out).toMatch(/parse error/);

    const slower = text.replace(/(alert: VmsnapGuestFrozenPastDeadline\n.*\n\s+for:) 30s/, '$1 2m');
    expect(slower).not.toBe(text);
    writeFileSync(broken, slower);
    const tested = await promtool('test', 'rules', path.join(dir, 'tests/freeze.yml'));
    expect(tested.code).not.toBe(0);
    expect(tested.out).toMatch(/FAILED[\s\S]*VmsnapGuestFrozenPastDeadline/);
  });

  it('every alert has a fixture where it fires and one where it stays quiet', () => {
    const fires = new Set<string>();
    const quiet = new Set<string>();
    for (const file of fixtures()) {
      for (const t of asList(asMap(parseYaml(readFileSync(file, 'utf8')), file).tests, 'tests')) {
        for (const a of asList(asMap(t, 'test').alert_rule_test, 'alert_rule_test')) {
          const { alertname, exp_alerts } = asMap(a, 'alert_rule_test') as { alertname: string; exp_alerts: Yaml };
          (asList(exp_alerts, 'exp_alerts').length ? fires : quiet).add(alertname);
        }
      }
    }
    const names = alerts.map((a) => a.alert!);
    expect(names.length).toBeGreaterThanOrEqual(8);
    expect(names.filter((n) => !fires.has(n)), 'alerts no fixture fires').toEqual([]);
    expect(names.filter((n) => !quiet.has(n)), 'alerts no fixture keeps quiet').toEqual([]);
    expect([...fires, ...quiet].filter((n) => !names.includes(n)), 'fixtures of alerts that do not exist').toEqual([]);
  });

  it('every alert has a severity, a summary, a description and a runbook in docs/operations.md', () => {
    const headings = new Set([...readFileSync(OPERATIONS, 'utf8').matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1]!)));
    for (const a of alerts) {
      expect(['critical', 'warning'], a.alert).toContain(a.labels.severity);
      expect(a.annotations.summary, a.alert).toMatch(/\S/);
      expect(a.annotations.description, a.alert).toMatch(/\S/);
      const [file, anchor] = a.annotations.runbook_url!.split('#');
      expect(file, a.alert).toBe('docs/operations.md');
      expect(headings.has(anchor!), `${a.alert}: no heading in docs/operations.md for #${anchor}`).toBe(true);
    }
  });

  it('they select only families a worker exposes (and up, and their own recordings)', async () => {
    const families = await exposed();
    const recorded = rules.flatMap((r) => (r.record ? [r.record] : []));
    for (const r of rules) expect(unknownNames(r.expr, families, ['up', ...recorded]), r.alert ?? r.record).toEqual([]);
    // A renamed family is caught: the check is not vacuous.
    expect(unknownNames('vmsnap_oldest_freeze_age_seconds > vmsnap_freeze_deadline_seconds', families)).toEqual(['vmsnap_freeze_deadline_seconds']);
  });
});

describe('deploy/grafana: the dashboard', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: { id: number; type: string; title: string; gridPos: { x: number; y: number; w: number; h: number }; datasource: { uid: string }; targets: { expr: string; refId: string }[] }[];
    templating: { list: { name: string; type: string; query: string | { query: string } }[] };
  };
  const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));

  it('reads PromQL names the way it should', () => {
    expect(metricNames('histogram_quantile(0.9, sum by (le, kind) (rate(vmsnap_flatten_seconds_bucket{instance=~"$instance"}[$__rate_interval])))')).toEqual(['vmsnap_flatten_seconds_bucket']);
    expect(metricNames('time() - max by (domain) (a_timestamp_seconds offset 1h) > 26 * 3600 and on (domain) b_vm')).toEqual(['a_timestamp_seconds', 'b_vm']);
    expect(metricNames('sum(up{job="vmsnap"}) / count(x:y:z) unless absent(w)')).toEqual(['up', 'x:y:z', 'w']);
  });

  it('every panel query selects only families a worker exposes (and up)', async () => {
    const families = await exposed();
    expect(exprs.length).toBeGreaterThanOrEqual(20);
    for (const { panel, expr } of exprs) expect(unknownNames(expr, families, ['up']), `${panel}: ${expr}`).toEqual([]);
    for (const v of dashboard.templating.list.filter((v) => v.type === 'query')) {
      const q = typeof v.query === 'string' ? v.query : v.query.query;
      const m = /^label_values\((\w+),\s*\w+\)$/.exec(q);
      expect(m, q).not.toBeNull();
      expect(families.names.has(m![1]!), q).toBe(true);
    }
  });

  it('shows what an operator asks first: freeze windows, frozen guests, runs, quiesced or not, per-VM age, the fleet, the copy, thaws, the build', () => {
    const all = exprs.map((e) => e.expr).join('\n');
    for (const family of [
      'vmsnap_freeze_window_seconds_bucket',
      'vmsnap_guests_frozen',
      'vmsnap_oldest_freeze_age_seconds',
      'vmsnap_oldest_freeze_deadline_seconds',
      'vmsnap_runs_total',
      'vmsnap_snapshots_total{quiesced="true"',
      'vmsnap_last_quiesced_success_timestamp_seconds',
      'vmsnap_fleet_host_alive',
      'vmsnap_flatten_seconds_bucket',
      'vmsnap_flatten_size_bytes_sum',
      'vmsnap_thaws_total',
      'vmsnap_build_info',
    ]) {
      expect(all).toContain(family);
    }
  });

  it('the screenshot sends each panel its own query: only Grafana\'s variables are replaced', () => {
    const w = { start: 1000, end: 1300, step: 2, scrapeSeconds: 1 };
    const sent = panelQueries(dashboard as unknown as GrafanaDashboard, w);
    expect(sent.map((q) => q.target.expr)).toEqual(exprs.map((e) => e.expr));
    for (const q of sent) {
      expect(q.query).not.toContain('$');
      const vars = { $__rate_interval: '4s', $__range: '300s', $__interval: '2s', $instance: '.*' };
      expect(q.query).toBe(Object.entries(vars).reduce((e, [k, v]) => e.replaceAll(k, v), q.target.expr));
    }
  });

  it('is a loadable Grafana model: unique panel ids, on a 24-column grid without overlaps, every query on the chosen datasource', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const taken = new Set<string>();
    for (const p of dashboard.panels) {
      expect(['stat', 'timeseries', 'bargauge', 'table'], p.title).toContain(p.type);
      expect(p.datasource.uid, p.title).toBe('${datasource}');
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
        for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
          expect(taken.has(`${x},${y}`), `${p.title} overlaps another panel at ${x},${y}`).toBe(false);
          taken.add(`${x},${y}`);
        }
      }
      expect(p.targets.length, p.title).toBeGreaterThan(0);
      expect(new Set(p.targets.map((t) => t.refId)).size, p.title).toBe(p.targets.length);
    }
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'instance']);
  });
});
