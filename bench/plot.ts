/**
 * The results plot: one panel per configuration (guest × paxos), each contender's host-measured
 * windows as dots (log scale; Nova is seconds, the rest ~100 ms), the guest probe gaps as rings,
 * the p50 as a bar. Drawn as SVG here, converted to PNG by `rsvg-convert` (Debian: librsvg2-bin),
 * else by headless Chromium (Debian: chromium); without either, only the SVG is written.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { CONTENDERS } from './contender';
import type { Sample } from './freeze-window';
import { quantile } from './stats';

const COLORS: Record<string, string> = { floor: '#2b8a3e', naive: '#e67700', nova: '#c92a2a', vmsnap: '#1c7ed6' };
const W = 330;
const H = 360;
const M = { l: 56, r: 12, t: 40, b: 40 };

export function renderSvg(samples: Sample[], title: string): string {
  const keys = [...new Set(samples.map((s) => `${s.guest}|${s.paxos}`))];
  const ok = samples.filter((s) => s.ok);
  const values = ok.flatMap((s) => [s.hostWindowMs!, ...(s.probeGapMs ? [s.probeGapMs] : [])]).filter((v) => v > 0);
  const lo = Math.pow(10, Math.floor(Math.log10(Math.max(1, Math.min(...values, 100)))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...values, 1000))));
  const width = Math.max(keys.length * W + 20, 760);
  const height = H + 70;
  const y = (v: number): number => M.t + (H - M.t - M.b) * (1 - (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)));
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="DejaVu Sans, sans-serif" font-size="11">`);
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="10" y="20" font-size="14" font-weight="bold">${esc(title)}</text>`);
  keys.forEach((key, k) => {
    const [guest, paxos] = key.split('|');
    const x0 = 10 + k * W;
    const mine = ok.filter((s) => `${s.guest}|${s.paxos}` === key);
    const disks = mine[0]?.disks ?? 0;
    out.push(`<g transform="translate(${x0},30)">`);
    out.push(`<text x="${M.l}" y="${M.t - 16}" font-weight="bold">${esc(`${guest} (${disks} disk${disks > 1 ? 's' : ''}), paxos ${paxos}`)}</text>`);
    for (let d = lo; d <= hi; d *= 10) {
      for (const m of [1, 2, 5]) {
        const v = d * m;
        if (v > hi) break;
        const yy = y(v);
        out.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${yy}" y2="${yy}" stroke="${m === 1 ? '#bbb' : '#eee'}"/>`);
        if (m === 1 || m === 5 || m === 2) out.push(`<text x="${M.l - 4}" y="${yy + 4}" text-anchor="end" fill="#555">${v >= 1000 ? `${v / 1000}s` : `${v}`}</text>`);
      }
    }
    out.push(`<text transform="translate(12,${(H - M.b + M.t) / 2}) rotate(-90)" text-anchor="middle" fill="#333">freeze window (ms, log)</text>`);
    const bw = (W - M.l - M.r) / CONTENDERS.length;
    CONTENDERS.forEach((c, i) => {
      const cx = M.l + bw * (i + 0.5);
      const pts = mine.filter((s) => s.contender === c);
      pts.forEach((s, j) => {
        const jitter = ((j * 37) % 11) - 5;
        out.push(`<circle cx="${cx - 8 + jitter}" cy="${y(s.hostWindowMs!)}" r="2.6" fill="${COLORS[c]}" fill-opacity="0.75"/>`);
        if (s.probeGapMs) out.push(`<circle cx="${cx + 10 + jitter}" cy="${y(s.probeGapMs)}" r="2.6" fill="none" stroke="${COLORS[c]}"/>`);
      });
      if (pts.length) {
        const p50 = quantile(pts.map((s) => s.hostWindowMs!), 0.5);
        out.push(`<line x1="${cx - bw / 2 + 6}" x2="${cx + bw / 2 - 6}" y1="${y(p50)}" y2="${y(p50)}" stroke="black" stroke-width="2"/>`);
        out.push(`<text x="${cx}" y="${y(p50) - 5}" text-anchor="middle" font-size="10">${p50 >= 1000 ? `${(p50 / 1000).toFixed(2)}s` : p50.toFixed(0)}</text>`);
      }
      out.push(`<text x="${cx}" y="${H - M.b + 16}" text-anchor="middle" fill="${COLORS[c]}" font-weight="bold">${c}</text>`);
    });
    out.push(`<rect x="${M.l}" y="${M.t}" width="${W - M.l - M.r}" height="${H - M.t - M.b}" fill="none" stroke="#888"/>`);
    out.push('</g>');
  });
  out.push(`<text x="10" y="${height - 26}" fill="#333">dots: host window (freeze call start → thaw call return); rings: guest probe gap (longest write gap);</text>`);
  out.push(`<text x="10" y="${height - 12}" fill="#333">bar: host p50. Runs interleaved floor, naive, nova, vmsnap; Nova = clone + flatten of a 1 GiB image inside the freeze.</text>`);
  out.push('</svg>');
  return out.join('\n');
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Writes `<base>.svg` and, when a converter exists, `<base>.png`; returns the PNG path or undefined. */
export function writePlot(svg: string, base: string): { svg: string; png?: string; converter?: string } {
  const svgPath = `${base}.svg`;
  const pngPath = `${base}.png`;
  writeFileSync(svgPath, svg);
  try {
    execFileSync('rsvg-convert', ['-f', 'png', '-o', pngPath, svgPath], { stdio: 'pipe', timeout: 60_000 });
    if (existsSync(pngPath)) return { svg: svgPath, png: pngPath, converter: 'rsvg-convert' };
  } catch {
    // fall through to chromium
  }
  try {
    const m = /width="(\d+)" height="(\d+)"/.exec(svg);
    execFileSync(
      'chromium',
      ['--headless', '--no-sandbox', '--disable-gpu', `--screenshot=${pngPath}`, `--window-size=${m?.[1] ?? 1400},${m?.[2] ?? 450}`, `file://${svgPath}`],
      { stdio: 'pipe', timeout: 120_000 },
    );
    if (existsSync(pngPath)) return { svg: svgPath, png: pngPath, converter: 'chromium' };
  } catch {
    // no converter: SVG only
  }
  return { svg: svgPath };
}
