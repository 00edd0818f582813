import { describe, expect, it } from 'vitest';
import { ActivityFailure, ApplicationFailure, CancelledFailure, RetryState, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { hostMetrics } from '../../src/host/metrics';
import type { Metrics } from '../../src/host/metrics';
import { FailureType } from '../../src/model/failures';
import { failedRun, succeededRun } from '../../src/model/run-end';
import { parseExposition } from '../helpers/exposition';
import type { Family } from '../helpers/exposition';

/*
 * What /metrics exposes, checked against Prometheus's conventions (prometheus.io/docs/practices/
 * naming and /instrumentation): every family has HELP and TYPE, once; counters and only counters
 * end in `_total`; units are base units (seconds, bytes) and named; a histogram's buckets cover
 * what it measures.
 */

/** A worker's metrics with every vmsnap family holding a sample, as after a day of runs. */
function busy(): Metrics {
  const m = hostMetrics();
  m.freezeCallStarted('f-1', 1_000);
  m.freezeWindowEnded({ freezeId: 'f-1', frozenAt: 990 }, 1_120);
  m.snapshotDuration.observe(0.04);
  m.failures.inc({ step: 'freeze' });
  m.clones.inc();
  m.flattenDuration.observe({ kind: 'snapshot' }, 42);
  m.flattenSize.observe({ kind: 'snapshot' }, 10 * 2 ** 30);
  m.verifications.inc({ verdict: 'verified' });
  m.lastVerified.set({ domain: 'vm-1' }, 1_750_000_000);
  m.runEnded({ outcome: 'succeeded', domain: 'vm-1', quiesced: true }, 1_750_000_000_000);
  m.runEnded({ outcome: 'failed', failureType: FailureType.FreezeFailed });
  m.fleetHostAlive.set({ host: 'hv-a' }, 1);
  m.fleetHostLastSeen.set({ host: 'hv-a' }, 1_750_000_000);
  m.fleetVm.set({ domain: 'vm-1', host: 'hv-a' }, 1);
  m.fleetRegistryUp.set(1);
  return m;
}

const buckets = (f: Family) =>
  f.samples
    .filter((s) => s.name.endsWith('_bucket'))
    .map((s) => /le="([^"]+)"/.exec(s.labels)![1]!)
    .filter((le) => le !== '+Inf')
    .map(Number);

describe('/metrics follows Prometheus’s conventions', () => {
  it('every family, vmsnap’s and the process’s, has one HELP and one TYPE; every sample belongs to one', async () => {
    const families = parseExposition(await busy().render());
    expect(families.length).toBeGreaterThan(20);
    for (const f of families) expect(f.help, `${f.name} has no HELP text`).toMatch(/\S/);
    // The process's own, from prom-client's default collectors.
    expect(families.map((f) => f.name)).toEqual(expect.arrayContaining(['process_resident_memory_bytes', 'process_cpu_seconds_total', 'nodejs_eventloop_lag_seconds']));
  });

  it('vmsnap’s counters and only they end in _total; histograms carry their unit; no unit but base units', async () => {
    const families = parseExposition(await busy().render());
    const ours = families.filter((f) => f.name.startsWith('vmsnap_'));
    expect(ours.length).toBeGreaterThan(15);
    for (const f of ours) {
      expect(f.name.endsWith('_total'), `${f.name} (${f.type})`).toBe(f.type === 'counter');
      if (f.type === 'histogram') expect(f.name, `${f.name}: a histogram's name ends in its unit`).toMatch(/_(seconds|bytes)$/);
      if (/timestamp/.test(f.name)) expect(f.name).toMatch(/_timestamp_seconds$/);
    }
    for (const f of families) {
      expect(f.name, `${f.name}: not a base unit`).not.toMatch(/(^|_)(ms|milliseconds|us|microseconds|ns|nanoseconds|minutes|hours|days|kb|mb|gb|kib|mib|gib|kilobytes|megabytes|gigabytes|percent)(_|$)/);
    }
  });

  it('the families a dashboard and its alerts need are there from the first scrape', async () => {
    const names = parseExposition(await hostMetrics().render()).map((f) => f.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'vmsnap_runs_total',
        'vmsnap_snapshots_total',
        'vmsnap_last_success_timestamp_seconds',
        'vmsnap_last_quiesced_success_timestamp_seconds',
        'vmsnap_freeze_window_seconds',
        'vmsnap_guests_frozen',
        'vmsnap_oldest_freeze_age_seconds',
        'vmsnap_oldest_freeze_deadline_seconds',
        'vmsnap_thaws_total',
        'vmsnap_flatten_seconds',
        'vmsnap_flatten_size_bytes',
        'vmsnap_build_info',
        'vmsnap_ceph_up',
        'vmsnap_temporal_up',
      ]),
    );
    const text = await hostMetrics().render();
    expect(text).toContain('vmsnap_guests_frozen 0\n');
    expect(text).toContain('vmsnap_ceph_up 0\n');
    expect(text).toContain('vmsnap_temporal_up 0\n');
    expect(text).toContain('vmsnap_thaws_total{layer="workflow"} 0\n');
    expect(text).toContain('vmsnap_snapshots_total{quiesced="true"} 0\n');
    expect(text).toContain('vmsnap_freeze_window_seconds_count 0\n');
    expect(text).toContain('vmsnap_oldest_freeze_deadline_seconds 0\n');
    // Every failure type at 0, so increase() in an alert sees a type's first failure.
    for (const type of [...Object.values(FailureType), 'Timeout', 'other']) expect(text).toContain(`vmsnap_runs_total{outcome="failed",failure_type="${type}"} 0\n`);
    expect(text).toContain('vmsnap_runs_total{outcome="cancelled",failure_type="none"} 0\n');
  });

  it('the freeze window’s buckets resolve 0.05 s … 30 s; a flatten’s reach past an hour', async () => {
    const families = parseExposition(await busy().render());
    const window = buckets(families.find((f) => f.name === 'vmsnap_freeze_window_seconds')!);
    expect(window).toContain(0.05);
    expect(window).toContain(30);
    expect(Math.min(...window)).toBeLessThanOrEqual(0.05);
    expect(window.filter((le) => le >= 0.05 && le <= 1).length, 'resolution where windows are').toBeGreaterThanOrEqual(8);
    expect(window.filter((le) => le > 1 && le <= 30).length).toBeGreaterThanOrEqual(4);
    const flatten = buckets(families.find((f) => f.name === 'vmsnap_flatten_seconds')!);
    expect(Math.max(...flatten)).toBeGreaterThanOrEqual(3600);
    const size = buckets(families.find((f) => f.name === 'vmsnap_flatten_size_bytes')!);
    expect(Math.min(...size)).toBeLessThanOrEqual(2 ** 30);
    expect(Math.max(...size)).toBeGreaterThanOrEqual(2 ** 40);
  });
});

describe('a run’s end on the worker', () => {
  it('counts runs by outcome and failure type, snapshots by quiesced, and each VM’s last success', async () => {
    const m = hostMetrics();
    m.runEnded({ outcome: 'succeeded', domain: 'vm-1', quiesced: true }, 1_750_000_000_000);
    m.runEnded({ outcome: 'succeeded', domain: 'vm-1', quiesced: false }, 1_750_000_060_000);
    m.runEnded({ outcome: 'succeeded', domain: 'vm-2', quiesced: true, reused: true }, 1_750_000_120_000);
    m.runEnded({ outcome: 'failed', failureType: FailureType.QuiesceUnavailable });
    m.runEnded({ outcome: 'failed', failureType: 'SomethingNobodyNamed' });
    m.runEnded({ outcome: 'failed' });
    m.runEnded({ outcome: 'cancelled' });
    const text = await m.render();
    expect(text).toContain('vmsnap_runs_total{outcome="succeeded",failure_type="none"} 3\n');
    expect(text).toContain('vmsnap_runs_total{outcome="failed",failure_type="QuiesceUnavailable"} 1\n');
    // Unknown types fold into one series: the label's values stay a fixed set.
    expect(text).toContain('vmsnap_runs_total{outcome="failed",failure_type="other"} 2\n');
    expect(text).toContain('vmsnap_runs_total{outcome="cancelled",failure_type="none"} 1\n');
    // The reused result made no snapshot.
    expect(text).toContain('vmsnap_snapshots_total{quiesced="true"} 1\n');
    expect(text).toContain('vmsnap_snapshots_total{quiesced="false"} 1\n');
    expect(text).toContain('vmsnap_last_success_timestamp_seconds{domain="vm-1"} 1750000060\n');
    expect(text).toContain('vmsnap_last_quiesced_success_timestamp_seconds{domain="vm-1"} 1750000000\n');
    expect(text).toContain('vmsnap_last_success_timestamp_seconds{domain="vm-2"} 1750000120\n');
  });

  it('the interceptor’s classification: a result, a typed failure at any depth, a cancel; a task failure is not an end', () => {
    expect(succeededRun({ domain: { name: 'vm-1', uuid: 'u' }, quiesced: true })).toEqual({ outcome: 'succeeded', domain: 'vm-1', quiesced: true, reused: false });
    expect(succeededRun({ domain: { name: 'vm-1' }, quiesced: false, reusedExisting: true })).toMatchObject({ quiesced: false, reused: true });
    expect(failedRun(ApplicationFailure.nonRetryable('x', FailureType.SnapshotTimeout))).toEqual({ outcome: 'failed', failureType: 'SnapshotTimeout' });
    const viaActivity = new ActivityFailure('activity failed', 'snapshotDisks', '1', RetryState.NON_RETRYABLE_FAILURE, 'worker', ApplicationFailure.nonRetryable('y', FailureType.SnapshotFailed));
    expect(failedRun(viaActivity)).toEqual({ outcome: 'failed', failureType: 'SnapshotFailed' });
    const timedOut = new ActivityFailure('activity failed', 'thawGuest', '1', RetryState.TIMEOUT, 'worker', new TimeoutFailure('timed out', undefined, TimeoutType.START_TO_CLOSE));
    expect(failedRun(timedOut)).toEqual({ outcome: 'failed', failureType: 'Timeout' });
    expect(failedRun(new CancelledFailure('cancelled'))).toEqual({ outcome: 'cancelled' });
    expect(failedRun(new TypeError('a bug: the workflow task fails and is retried'))).toBeUndefined();
  });
});
