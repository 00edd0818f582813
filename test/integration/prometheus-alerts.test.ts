import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { releaseFaultPoint } from '../../src/host/fault-points';
import type { SnapshotRequest } from '../../src/model/input';
import { ctlSocketPath, guestCtlOk } from '../../support/lab/guest-ctl';
import { labVars, need } from '../../support/lab/env';
import { longestGap, readTicks } from '../../support/lab/probe';
import { freePortPair } from '../../support/lab/free-port';
import { PrivatePrometheus } from '../../support/lab/prometheus';
import type { PromAlert } from '../../support/lab/prometheus';
import { ensureThawed, freezeStatus } from '../helpers/guest';
import { until } from '../helpers/until';
import { sleep, WorkerProcess } from '../helpers/worker-process';

/*
 * The shipped rules, unmodified, in a real Prometheus (Debian's package) that scrapes a real lab
 * worker every second: a guest that vmsnap froze stays frozen past its deadline because its agent
 * hangs (SIGSTOP: no layer can prove a thaw), VmsnapGuestFrozenPastDeadline fires once that has
 * lasted the rule's `for`, and it clears once the agent answers and the guest is thawed.
 */

const ROOT = path.resolve(__dirname, '../..');
const RULES = path.join(ROOT, 'deploy/prometheus/vmsnap-alerts.yml');
const ALERT = 'VmsnapGuestFrozenPastDeadline';
// Long enough for the hang to land before the guard fires (one control-socket round trip).
const DEADLINE_MS = 6000;
const FOR_SECONDS = 30; // the rule's `for:` in the shipped file

const vars = labVars();
const guest = need(vars, 'VMSNAP_GUEST_1DISK');
const ctl = ctlSocketPath(need(vars, 'VMSNAP_PROBE_DIR'), guest);
let metricsPort: number;
let worker: WorkerProcess;
let prom: PrivatePrometheus | undefined;
let client: Client;
let handle: WorkflowHandle | undefined;
let hung = false;

beforeAll(async () => {
  const t0 = Date.now();
  metricsPort = await freePortPair();
  worker = new WorkerProcess(vars, `prom-${randomUUID().slice(0, 8)}`, { VMSNAP_METRICS_PORT: String(metricsPort), VMSNAP_METRICS_ADDRESS: '127.0.0.1' });
  await worker.start({ points: ['freeze:after'], pauseMs: 120_000 });
  prom = await PrivatePrometheus.start({ targets: [`127.0.0.1:${metricsPort}`], ruleFiles: [RULES] });
  client = new Client({ connection: await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') }) });
  console.log(`worker and Prometheus up in ${Date.now() - t0} ms`);
});

afterAll(async () => {
  const t0 = Date.now();
  if (hung) await guestCtlOk(ctl, { command: 'resume-agent' }).catch(() => undefined);
  if (worker) releaseFaultPoint(worker.faultDir, 'freeze:after');
  // The run must end while its worker still polls: left open, it would hold the guest's lock.
  if (handle) {
    const ended = await Promise.race([handle.result().then(() => true, () => true), sleep(60_000).then(() => false)]);
    if (!ended) await handle.terminate('prometheus-alerts test: the run did not end').catch(() => undefined);
  }
  await ensureThawed(vars, guest);
  await prom?.stop();
  await worker?.stop();
  await client?.connection.close();
  console.log(`cleaned up in ${Date.now() - t0} ms`);
});

const ours = (alerts: PromAlert[]) => alerts.filter((a) => a.labels.alertname === ALERT && a.labels.instance === `127.0.0.1:${metricsPort}`);

describe('the shipped alert rules in a real Prometheus, scraping a lab worker', () => {
  it(`${ALERT} fires for a guest frozen past its deadline, and clears once it is thawed`, async () => {
    const p = prom!;
    await until('Prometheus to scrape the worker', async () => (await p.query('up{job="vmsnap"}'))[0]?.value[1] === '1', 30_000);
    const rules = await p.api<{ groups: { file: string; rules: { name: string; type: string }[] }[] }>('rules');
    expect(rules.groups.every((g) => g.file === RULES)).toBe(true);
    expect(rules.groups.flatMap((g) => g.rules.map((r) => r.name))).toContain(ALERT);

    const input: SnapshotRequest = { domain: guest, quiesce: 'require', freezeDeadlineMs: DEADLINE_MS, agentTimeoutSec: 2, snapshotTimeoutMs: 3000, target: { clone: false } };
    handle = await client.workflow.start('consistentSnapshot', { taskQueue: worker.taskQueue, workflowId: `prom-alert-${randomUUID()}`, args: [input] });
    // A run that ends before it froze (the guest busy with another run, say) says why at once.
    const run = handle;
    const frozenAt = await Promise.race([
      worker.reached('freeze:after'),
      run.result().then(
        () => Promise.reject(new Error('the run completed without reaching freeze:after')),
        (err: unknown) => Promise.reject(new Error(`the run failed before it froze the guest: ${String((err as Error).cause ?? err)}`)),
      ),
    ]);
    await guestCtlOk(ctl, { command: 'hang-agent' });
    hung = true;
    const hungAfterMs = Date.now() - frozenAt;
    expect(hungAfterMs, 'the agent must hang before the guard fires at the deadline').toBeLessThan(DEADLINE_MS - 1000);

    // The worker exposes the run's own deadline; Prometheus reads it.
    await until('the deadline on /metrics', async () => (await p.query('vmsnap_oldest_freeze_deadline_seconds'))[0]?.value[1] === String(DEADLINE_MS / 1000), 10_000);
    const firing = await until('the alert to fire', async () => ours(await p.alerts()).find((a) => a.state === 'firing'), 90_000, 500);
    const firedAfterS = (Date.now() - frozenAt) / 1000;
    // Measured from the freeze call's return; the journal's clock starts at arming, just before the call.
    expect(firedAfterS).toBeGreaterThanOrEqual(DEADLINE_MS / 1000 + FOR_SECONDS - 1);
    expect(firing.labels.severity).toBe('critical');
    expect(Number(firing.value)).toBeGreaterThan(DEADLINE_MS / 1000 + FOR_SECONDS - 2);
    expect(firing.annotations.runbook_url).toBe('docs/operations.md#vmsnapguestfrozenpastdeadline');
    // The truth, from the guest's own probe: no write has completed since the freeze.
    const stalled = longestGap(await readTicks(guest, frozenAt - 2000), frozenAt, Date.now());
    expect(stalled?.ms ?? 0).toBeGreaterThanOrEqual((DEADLINE_MS / 1000 + FOR_SECONDS - 1) * 1000);

    await guestCtlOk(ctl, { command: 'resume-agent' });
    hung = false;
    releaseFaultPoint(worker.faultDir, 'freeze:after');
    await until('the alert to clear', async () => ours(await p.alerts()).length === 0, 60_000, 500);
    const clearedAfterS = (Date.now() - frozenAt) / 1000;
    expect(await freezeStatus(vars, guest)).toBe('thawed');
    const resumedAt = Date.now();
    await until('the probe to write again', async () => (await readTicks(guest, resumedAt)).length > 0, 10_000);
    expect((await p.query('vmsnap_guests_frozen'))[0]?.value[1]).toBe('0');

    // The run ends, whichever way (the guard's deadline passed: under quiesce=require it fails).
    const status = await run.result().then(
      () => 'COMPLETED',
      async () => (await run.describe()).status.name,
    );
    expect(['COMPLETED', 'FAILED']).toContain(status);
    console.log(`${ALERT}: agent hung ${hungAfterMs} ms after the freeze; firing ${firedAfterS.toFixed(1)} s after it, cleared ${clearedAfterS.toFixed(1)} s after it; run ${status}`);
  });
});
