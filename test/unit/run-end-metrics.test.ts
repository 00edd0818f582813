import { bundleWorkflowCode } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostMetrics } from '../../src/host/metrics';
import { FailureType } from '../../src/model/failures';
import { runEndInterceptorPath, workflowsPath } from '../../src/worker/workflows-path';
import { runSinks } from '../../src/worker/run-sinks';
import { FakeHost } from '../../support/fast/fake-host';
import { failureOf } from '../helpers/failure-of';
import { sample } from '../helpers/exposition';
import { WorkflowLane } from '../helpers/workflow-lane';

/*
 * vmsnap_runs_total and what follows from a success, counted by the worker that ran the run's
 * host part: the real workflow code, bundled with the run-end interceptor as the worker bundles
 * it, on a throwaway dev server, its activities scripted (support/fast/fake-host.ts).
 */
const metrics = hostMetrics();
let lane: WorkflowLane | undefined;

beforeAll(async () => {
  const noop = () => undefined;
  const { code } = await bundleWorkflowCode({
    workflowsPath: workflowsPath(),
    workflowInterceptorModules: [runEndInterceptorPath()],
    logger: { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop },
  });
  lane = await WorkflowLane.start({ workflowBundle: code, sinks: runSinks(metrics) });
}, 120_000);

afterAll(async () => {
  await lane?.stop();
});

const keepSnapshot = { target: { clone: false } } as const;
const series = async (s: string) => sample(await metrics.render(), s);

describe('each run’s end, once, on its host’s worker', () => {
  it('a quiesced run, a crash-consistent one and a failed one', async () => {
    const quiesced = new FakeHost('vm-runs-quiesced');
    const r1 = await (await lane!.start(quiesced, { quiesce: 'require', ...keepSnapshot })).result();
    expect(r1.quiesced).toBe(true);
    const crash = new FakeHost('vm-runs-crash');
    await (await lane!.start(crash, { quiesce: 'skip', ...keepSnapshot })).result();
    const failing = new FakeHost('vm-runs-failing');
    failing.agent = { configured: true, responding: false };
    expect((await failureOf((await lane!.start(failing, { quiesce: 'require', ...keepSnapshot })).result())).type).toBe(FailureType.QuiesceUnavailable);

    expect(await series('vmsnap_runs_total{outcome="succeeded",failure_type="none"}')).toBe(2);
    expect(await series('vmsnap_runs_total{outcome="failed",failure_type="QuiesceUnavailable"}')).toBe(1);
    expect(await series('vmsnap_snapshots_total{quiesced="true"}')).toBe(1);
    expect(await series('vmsnap_snapshots_total{quiesced="false"}')).toBe(1);
    const now = Date.now() / 1000;
    expect(now - (await series('vmsnap_last_quiesced_success_timestamp_seconds{domain="vm-runs-quiesced"}'))).toBeLessThan(60);
    expect(now - (await series('vmsnap_last_success_timestamp_seconds{domain="vm-runs-crash"}'))).toBeLessThan(60);
    expect(await series('vmsnap_last_quiesced_success_timestamp_seconds{domain="vm-runs-crash"}')).toBeNaN();
    expect(await series('vmsnap_last_success_timestamp_seconds{domain="vm-runs-failing"}')).toBeNaN();
  });

  it('a cancelled run', async () => {
    const h = new FakeHost('vm-runs-cancelled');
    h.disks = ['vda'];
    h.hang('snapshotDisks');
    const run = await lane!.start(h, { quiesce: 'require', ...keepSnapshot }, { workflowTaskTimeout: '2s' });
    await h.reached('snapshotDisks');
    await run.cancel();
    await run.result().catch(() => undefined);
    h.releaseHung();
    expect(await series('vmsnap_runs_total{outcome="cancelled",failure_type="none"}')).toBe(1);
  });
});
