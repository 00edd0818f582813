/**
 * `npx tsx scripts/dashboard-screenshot.ts [--out docs/dashboard.png] [--no-runs]`: a picture of
 * deploy/grafana/vmsnap-dashboard.json with real lab data. Grafana does not install here, so this
 * is vmsnap's own rendering of the dashboard's queries (support/lab/dashboard-page.ts), not Grafana:
 *
 *   1. a host worker for a host id of its own on lab host A, /metrics on a free port;
 *   2. a private Prometheus (support/lab/prometheus.ts) scraping it every second, with the shipped
 *      rules loaded;
 *   3. a few real snapshot runs through the CLI (`vmsnap snapshot ... --host <id> --wait --json`):
 *      quiesced ones of the 1- and 3-disk guests, a crash-consistent one (--quiesce skip), one that
 *      fails (--quiesce require on the guest without an agent), one that falls back (prefer);
 *   4. every panel's queries answered by that Prometheus over the runs' time range, drawn into one
 *      HTML page on the dashboard's grid, and a full-page screenshot by headless Chromium;
 *   5. the runs' images removed, the worker retired from the fleet, Prometheus stopped.
 *
 * Needs the lab (npm run lab:up). Takes about two to four minutes.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createHostWorker } from '../src/worker/run-worker';
import { jsonLogger } from '../src/worker/logger';
import { loadLabEnv } from '../support/lab/env';
import type { LabEnv } from '../support/lab/env';
import { labWorkerConfig } from '../support/lab/worker-config';
import { freePortPair } from '../support/lab/free-port';
import { PrivatePrometheus } from '../support/lab/prometheus';
import { startChromium } from '../support/lab/chromium';
import { rbd } from '../support/lab/cli-tools';
import { panelQueries, renderPage } from '../support/lab/dashboard-page';
import type { GrafanaDashboard, GrafanaTarget, QueryWindow, Series } from '../support/lab/dashboard-page';

const ROOT = path.resolve(__dirname, '..');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/vmsnap-dashboard.json');
const RULES = path.join(ROOT, 'deploy/prometheus/vmsnap-alerts.yml');
const SCRAPE_SECONDS = 1;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function cliEnv(lab: LabEnv): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    VMSNAP_TEMPORAL_ADDRESS: lab.temporal.address,
    VMSNAP_TEMPORAL_NAMESPACE: lab.temporal.namespace,
    VMSNAP_LIBVIRT_URI: lab.libvirt!.uri,
    VMSNAP_CEPH_CONF: lab.ceph.conf,
    VMSNAP_CEPH_ID: lab.ceph.vmsnapId,
    VMSNAP_CEPH_KEYRING: lab.ceph.vmsnapKeyring,
  };
}

/** `vmsnap snapshot <domain> --host <host> --wait --json ...flags`; its exit code and JSON. */
function snapshot(lab: LabEnv, host: string, domain: string, flags: string[]): Promise<{ code: number; doc: { disks?: { image?: string }[]; quiesced?: boolean; type?: string } }> {
  const argv = [path.join(ROOT, 'bin/vmsnap.js'), 'snapshot', domain, '--host', host, '--wait', '--json', '--workflow-id', `dash-${domain}-${randomUUID().slice(0, 8)}`, ...flags];
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { env: cliEnv(lab), timeout: 300_000, maxBuffer: 16 << 20 }, (err, stdout) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      let doc = {};
      try {
        doc = JSON.parse(stdout) as object;
      } catch {
        // an empty or torn document: the code says enough
      }
      resolve({ code, doc });
    });
  });
}

async function removeImage(lab: LabEnv, image: string): Promise<void> {
  const snaps = await rbd(lab, ['snap', 'ls', '--format', 'json', image]).then((r) => JSON.parse(r.stdout) as { name: string }[], () => []);
  for (const s of snaps) {
    // A finalized image keeps a protected snapshot for restore's clones.
    await rbd(lab, ['snap', 'unprotect', `${image}@${s.name}`]).catch(() => undefined);
    await rbd(lab, ['snap', 'rm', `${image}@${s.name}`]).catch(() => undefined);
  }
  await rbd(lab, ['rm', '--no-progress', image]).catch((err: unknown) => console.error(`could not remove ${image}: ${String(err)}`));
}

async function main(): Promise<void> {
  const out = path.resolve(arg('--out') ?? path.join(ROOT, 'docs/dashboard.png'));
  const lab = loadLabEnv();
  if (!lab.guests || !lab.libvirt) throw new Error('the lab has no guests: npm run lab:up');
  const host = `dash-${randomUUID().slice(0, 8)}`;
  const port = await freePortPair();
  const config = { ...labWorkerConfig(lab, host), metricsPort: port, metricsAddress: '127.0.0.1' };
  const quiet = { write: () => true } as unknown as NodeJS.WritableStream;
  const worker = await createHostWorker(config, jsonLogger({ host }, quiet));
  const running = worker.run();
  const images: string[] = [];
  let prom: PrivatePrometheus | undefined;
  try {
    prom = await PrivatePrometheus.start({ targets: [`127.0.0.1:${port}`], ruleFiles: [RULES], intervalSeconds: SCRAPE_SECONDS });
    const start = Date.now() / 1000 - 5;
    await sleep(10_000);
    if (!process.argv.includes('--no-runs')) {
      const g = lab.guests;
      const plan: [string, string[]][] = [
        [g.oneDisk, ['--quiesce', 'require']],
        [g.threeDisk, ['--quiesce', 'require']],
        [g.oneDisk, ['--quiesce', 'require']],
        [g.oneDisk, ['--quiesce', 'skip']],
        [g.noAgent, ['--quiesce', 'require']],
        [g.threeDisk, ['--quiesce', 'require']],
        [g.noAgent, ['--quiesce', 'prefer']],
        [g.oneDisk, ['--quiesce', 'require']],
      ];
      for (const [domain, flags] of plan) {
        const r = await snapshot(lab, host, domain, flags);
        for (const d of r.doc.disks ?? []) if (d.image) images.push(d.image);
        console.log(`snapshot ${domain} ${flags.join(' ')}: exit ${r.code}${r.doc.quiesced !== undefined ? `, quiesced ${r.doc.quiesced}` : ''}${r.doc.type ? `, ${r.doc.type}` : ''}`);
        await sleep(5_000);
      }
    }
    await sleep(10_000);
    const end = Date.now() / 1000;
    const w: QueryWindow = { start, end, step: Math.max(1, Math.ceil((end - start) / 150)), scrapeSeconds: SCRAPE_SECONDS };

    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as GrafanaDashboard;
    const results = new Map<number, { target: GrafanaTarget; series: Series[] }[]>();
    for (const q of panelQueries(dashboard, w)) {
      const series: Series[] = q.instant
        ? (await prom.query(q.query, w.end)).map((s) => ({ labels: s.metric, points: [[s.value[0], Number(s.value[1])]] }))
        : (await prom.queryRange(q.query, w.start, w.end, w.step)).map((s) => ({ labels: s.metric, points: s.values.map(([t, v]) => [t, Number(v)] as [number, number]) }));
      results.set(q.panel.id, [...(results.get(q.panel.id) ?? []), { target: q.target, series }]);
    }
    for (const p of dashboard.panels) console.log(`panel "${p.title}": ${(results.get(p.id) ?? []).reduce((n, r) => n + r.series.length, 0)} series`);

    const note =
      `vmsnap's rendering of ${path.relative(ROOT, DASHBOARD)}: each panel's own PromQL (variables: instance=All, ` +
      `$__rate_interval=${Math.max(4 * w.scrapeSeconds, w.step + w.scrapeSeconds)}s) answered by a private Prometheus scraping a lab worker, ` +
      `drawn by scripts/dashboard-screenshot.ts — not Grafana. ${new Date(w.start * 1000).toISOString().slice(0, 19)}Z to ${new Date(w.end * 1000).toISOString().slice(11, 19)}Z, step ${w.step}s.`;
    const html = renderPage(dashboard, results, w, note);
    mkdirSync(path.join(ROOT, 'test-artifacts'), { recursive: true });
    writeFileSync(path.join(ROOT, 'test-artifacts/dashboard.html'), html);
    const browser = await startChromium({ viewport: { width: 24 * 64 + 32, height: 1000 } });
    try {
      await browser.page.setContent(html, { waitUntil: 'load' });
      mkdirSync(path.dirname(out), { recursive: true });
      await browser.page.screenshot({ path: out, fullPage: true });
    } finally {
      await browser.close();
    }
    console.log(`wrote ${path.relative(ROOT, out)}`);
  } finally {
    await prom?.stop();
    worker.shutdown({ retire: true });
    await running;
    for (const image of images) await removeImage(lab, image);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error('dashboard-screenshot failed:', err);
    process.exit(1);
  },
);
