/**
 * vmsnap's own rendering of deploy/grafana/vmsnap-dashboard.json: each panel's queries, exactly
 * as written but for Grafana's variables, answered by a real Prometheus, and drawn as one
 * self-contained HTML page with inline SVG (no script, no CDN). Grafana itself does not install
 * here; this shows what the dashboard's queries return, laid out on the dashboard's grid, not how
 * Grafana draws them. Used by scripts/dashboard-screenshot.ts.
 */

export interface GrafanaTarget {
  expr: string;
  legendFormat?: string;
  refId: string;
  instant?: boolean;
}

export interface GrafanaPanel {
  id: number;
  type: string;
  title: string;
  description?: string;
  gridPos: { x: number; y: number; w: number; h: number };
  targets: GrafanaTarget[];
  fieldConfig?: { defaults?: { unit?: string; decimals?: number; thresholds?: { steps: { color: string; value: number | null }[] } } };
}

export interface GrafanaDashboard {
  title: string;
  panels: GrafanaPanel[];
}

/** The time window the page shows, in Unix seconds, and the scrape interval behind the data. */
export interface QueryWindow {
  start: number;
  end: number;
  step: number;
  scrapeSeconds: number;
}

export interface PanelQuery {
  panel: GrafanaPanel;
  target: GrafanaTarget;
  /** The target's expr with Grafana's variables replaced, nothing else changed. */
  query: string;
  instant: boolean;
}

export interface Series {
  labels: Record<string, string>;
  points: [number, number][];
}

/** `$__rate_interval` as Grafana computes it: at least four scrapes, at least a step and a scrape. */
export function rateInterval(w: QueryWindow): number {
  return Math.max(4 * w.scrapeSeconds, w.step + w.scrapeSeconds);
}

/** Grafana's variables for this window; `$instance` is "All" (the variable's allValue, `.*`). */
export function substitute(expr: string, w: QueryWindow): string {
  return expr
    .replaceAll('$__rate_interval', `${rateInterval(w)}s`)
    .replaceAll('$__range', `${Math.round(w.end - w.start)}s`)
    .replaceAll('$__interval', `${w.step}s`)
    .replaceAll('$instance', '.*');
}

export function panelQueries(dashboard: GrafanaDashboard, w: QueryWindow): PanelQuery[] {
  return dashboard.panels.flatMap((panel) =>
    panel.targets.map((target) => ({ panel, target, query: substitute(target.expr, w), instant: panel.type !== 'timeseries' })),
  );
}

const PALETTE = ['#73bf69', '#f2cc0c', '#5794f2', '#ff780a', '#f2495c', '#b877d9', '#8ab8ff', '#fade2a', '#37872d', '#c4162a'];
const COL_PX = 64;
const ROW_PX = 30;

const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

function legendOf(target: GrafanaTarget, labels: Record<string, string>): string {
  if (target.legendFormat) return target.legendFormat.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k: string) => labels[k] ?? '');
  const shown = Object.entries(labels).filter(([k]) => k !== '__name__' && k !== 'job');
  return shown.length ? shown.map(([k, v]) => `${k}=${v}`).join(', ') : target.expr;
}

/** A value in the panel's unit, short. */
export function formatValue(v: number, unit = 'none'): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? 'NaN' : String(v);
  const num = (x: number) => (Math.abs(x) >= 100 || Number.isInteger(x) ? x.toFixed(0) : x.toPrecision(3).replace(/\.?0+$/, ''));
  switch (unit) {
    case 's':
      if (Math.abs(v) < 1 && v !== 0) return `${num(v * 1000)} ms`;
      if (Math.abs(v) < 120) return `${num(v)} s`;
      if (Math.abs(v) < 7200) return `${num(v / 60)} min`;
      return `${num(v / 3600)} h`;
    case 'Bps':
    case 'bytes': {
      const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
      let x = v;
      let i = 0;
      while (Math.abs(x) >= 1024 && i < units.length - 1) {
        x /= 1024;
        i++;
      }
      return `${num(x)} ${units[i]}${unit === 'Bps' ? '/s' : ''}`;
    }
    case 'percentunit':
      return `${num(v * 100)}%`;
    default:
      return num(v);
  }
}

function thresholdColor(panel: GrafanaPanel, v: number): string {
  const steps = panel.fieldConfig?.defaults?.thresholds?.steps ?? [];
  let color = '#73bf69';
  for (const s of steps) if (s.value === null || v >= s.value) color = s.color === 'green' ? '#73bf69' : s.color === 'red' ? '#f2495c' : s.color;
  return color;
}

function stat(panel: GrafanaPanel, data: Series[]): string {
  const v = data[0]?.points.at(-1)?.[1];
  if (v === undefined) return '<div class="empty">No data</div>';
  const decimals = panel.fieldConfig?.defaults?.decimals;
  const shown = decimals === undefined ? v : Number(v.toFixed(decimals));
  return `<div class="stat" style="color:${thresholdColor(panel, v)}">${esc(formatValue(shown, panel.fieldConfig?.defaults?.unit))}</div>`;
}

function bars(panel: GrafanaPanel, target: GrafanaTarget, data: Series[]): string {
  if (!data.length) return '<div class="empty">No data</div>';
  const rows = data.map((s) => ({ name: legendOf(target, s.labels), v: s.points.at(-1)?.[1] ?? NaN })).sort((a, b) => b.v - a.v);
  const max = Math.max(...rows.map((r) => r.v).filter(Number.isFinite), 1e-9);
  return rows
    .map((r, i) => `<div class="bar"><span class="name">${esc(r.name)}</span><span class="track"><span class="fill" style="width:${Math.max(0, (r.v / max) * 100).toFixed(1)}%;background:${PALETTE[i % PALETTE.length]}"></span></span><span class="val">${esc(formatValue(r.v, panel.fieldConfig?.defaults?.unit))}</span></div>`)
    .join('');
}

function table(data: Series[]): string {
  if (!data.length) return '<div class="empty">No data</div>';
  const cols = [...new Set(data.flatMap((s) => Object.keys(s.labels)))].filter((k) => k !== '__name__' && k !== 'job');
  const head = cols.map((c) => `<th>${esc(c)}</th>`).join('');
  const body = data.map((s) => `<tr>${cols.map((c) => `<td>${esc(s.labels[c] ?? '')}</td>`).join('')}</tr>`).join('');
  return `<table><tr>${head}</tr>${body}</table>`;
}

function timeseries(panel: GrafanaPanel, lines: { name: string; points: [number, number][] }[], w: QueryWindow, width: number, height: number): string {
  const unit = panel.fieldConfig?.defaults?.unit;
  const values = lines.flatMap((l) => l.points.map((p) => p[1])).filter(Number.isFinite);
  if (!values.length) return '<div class="empty">No data</div>';
  const lo = Math.min(0, ...values);
  const top = Math.max(...values);
  const hi = top > lo ? top * 1.1 : lo + 1;
  const left = 64;
  const plotW = width - left - 8;
  const plotH = height - 22;
  const x = (t: number) => left + ((t - w.start) / (w.end - w.start)) * plotW;
  const y = (v: number) => 4 + plotH - ((v - lo) / (hi - lo)) * plotH;
  const grid = [0, 0.5, 1]
    .map((f) => lo + f * (hi - lo))
    .map((v) => `<line x1="${left}" x2="${left + plotW}" y1="${y(v)}" y2="${y(v)}" class="grid"/><text x="${left - 6}" y="${y(v) + 4}" class="axis" text-anchor="end">${esc(formatValue(v, unit))}</text>`)
    .join('');
  const times = ([[w.start, 'start'], [(w.start + w.end) / 2, 'middle'], [w.end, 'end']] as const)
    .map(([t, anchor]) => `<text x="${x(t)}" y="${height - 4}" class="axis" text-anchor="${anchor}">${new Date(t * 1000).toISOString().slice(11, 19)}</text>`)
    .join('');
  const marks = lines
    .map((l, i) => {
      const color = PALETTE[i % PALETTE.length];
      const pts = l.points.filter((p) => Number.isFinite(p[1]));
      // Points where the query had a value; a gap (no value) breaks the line, as in Grafana.
      const runs: [number, number][][] = [];
      let prev: number | undefined;
      for (const p of pts) {
        if (prev === undefined || p[0] - prev > w.step * 1.5) runs.push([]);
        runs.at(-1)!.push(p);
        prev = p[0];
      }
      return runs
        .map((r) =>
          r.length === 1
            ? `<circle cx="${x(r[0]![0])}" cy="${y(r[0]![1])}" r="2.5" fill="${color}"/>`
            : `<polyline fill="none" stroke="${color}" stroke-width="2" points="${r.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ')}"/>`,
        )
        .join('');
    })
    .join('');
  const legend = lines.map((l, i) => `<span class="key"><i style="background:${PALETTE[i % PALETTE.length]}"></i>${esc(l.name)}</span>`).join('');
  return `<svg width="${width}" height="${height}">${grid}${times}${marks}</svg><div class="legend">${legend}</div>`;
}

/** The page: every panel at its grid position, drawn from `results` (keyed by panel id). */
export function renderPage(dashboard: GrafanaDashboard, results: Map<number, { target: GrafanaTarget; series: Series[] }[]>, w: QueryWindow, note: string): string {
  const panels = dashboard.panels
    .map((p) => {
      const width = p.gridPos.w * COL_PX - 8;
      const height = p.gridPos.h * ROW_PX - 8;
      const res = results.get(p.id) ?? [];
      const all = res.flatMap((r) => r.series);
      let body: string;
      if (p.type === 'stat') body = stat(p, all);
      else if (p.type === 'bargauge') body = bars(p, res[0]!.target, all);
      else if (p.type === 'table') body = table(all);
      else {
        const lines = res.flatMap((r) => r.series.map((s) => ({ name: legendOf(r.target, s.labels), points: s.points })));
        // Legend keys wrap: about 7 px a character plus the swatch and gap.
        const legendPx = lines.reduce((n, l) => n + l.name.length * 7 + 30, 0);
        body = timeseries(p, lines, w, width - 16, height - 30 - 15 * Math.ceil(legendPx / (width - 16)));
      }
      return `<section class="panel" style="left:${p.gridPos.x * COL_PX}px;top:${p.gridPos.y * ROW_PX}px;width:${width}px;height:${height}px" title="${esc(p.description ?? '')}"><h2>${esc(p.title)}</h2>${body}</section>`;
    })
    .join('\n');
  const bottom = Math.max(...dashboard.panels.map((p) => p.gridPos.y + p.gridPos.h)) * ROW_PX;
  return `<!doctype html><html><head><meta charset="utf-8"><title>${esc(dashboard.title)}</title><style>
body{margin:0;padding:12px 16px;background:#111217;color:#ccccdc;font:13px/1.3 sans-serif;width:${24 * COL_PX}px}
header{display:flex;justify-content:space-between;align-items:baseline;margin-bottom:10px}
header h1{font-size:18px;margin:0;color:#fff} header p{margin:0;color:#8e8e9e;font-size:12px;max-width:1100px;text-align:right}
.grid{stroke:#2c3235;stroke-width:1} .axis{fill:#8e8e9e;font-size:10px}
main{position:relative;height:${bottom}px}
.panel{position:absolute;box-sizing:border-box;background:#181b1f;border:1px solid #2c3235;border-radius:3px;padding:6px 8px;overflow:hidden}
.panel h2{font-size:13px;font-weight:500;margin:0 0 4px;color:#ccccdc}
.stat{font-size:40px;font-weight:500;text-align:center;margin-top:14px}
.empty{color:#6e6e7e;text-align:center;margin-top:30px}
.legend{font-size:11px;color:#ccccdc} .key{margin-right:12px;white-space:nowrap} .key i{display:inline-block;width:12px;height:3px;margin-right:4px;vertical-align:middle}
.bar{display:flex;align-items:center;margin:4px 0;font-size:12px} .bar .name{width:30%;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
.bar .track{flex:1;background:#22252b;height:14px;margin:0 8px} .bar .fill{display:block;height:100%} .bar .val{width:70px;text-align:right}
table{border-collapse:collapse;width:100%;font-size:12px} th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #2c3235} th{color:#8e8e9e;font-weight:500}
</style></head><body><header><h1>${esc(dashboard.title)}</h1><p>${esc(note)}</p></header><main>
${panels}
</main></body></html>`;
}
