/** Redraws the plot of a results file: `npx tsx bench/replot.ts bench/results/bench-….json`. */
import { readFileSync } from 'node:fs';
import type { Sample } from './freeze-window';
import { renderSvg, writePlot } from './plot';

const file = process.argv[2];
if (!file) throw new Error('usage: npx tsx bench/replot.ts RESULTS.json');
const data = JSON.parse(readFileSync(file, 'utf8')) as { started: string; options: { runs: number }; samples: Sample[] };
const title = `vmsnap freeze window vs baselines (${data.options.runs} interleaved runs each; ${data.started.slice(0, 16)}Z)`;
console.log(writePlot(renderSvg(data.samples, title), file.replace(/\.json$/, '')));
