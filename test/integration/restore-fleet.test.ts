import { listHosts } from '../../src/worker/fleet-index';
import { mkdtempSync, existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLEET_TASK_QUEUE } from '../../src/model/fleet';
import type { RestoreResult } from '../../src/model/restore-point';
import type { SnapshotResult } from '../../src/model/types';
import { loadLabEnv } from '../../support/lab/env';
import type { LabHostEnv } from '../../support/lab/env';
import { run } from '../../support/lab/cli-tools';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { labGuestRecreate } from '../helpers/restore-lab';
import { quiescedTruthViolations } from '../helpers/truth';
import { until } from '../helpers/until';
import { copyName } from '../../src/model/verification';
import type { VerifyResult } from '../../src/model/verification';
import { OrphanReaper } from '../../src/worker/orphan-reaper';
import type { ProgressView } from '../../workflows/progress';
import { releaseFaultPoint } from '../../src/host/fault-points';
import { parseExposition, sample } from '../helpers/exposition';
import { freePort } from '../helpers/free-port';

/*
 * Restore in the fleet (issue 25 #7), on the lab's two hypervisor hosts: the VM is found by UUID
 * on every live host and the restore runs on that VM's host, under the VM's domain lock, whatever
 * host the CLI was started on. The lab's host-B guest runs on hv-b; the CLI runs as on hv-a.
 */
const env = loadLabEnv();
const hosts = env.hosts;
if (!hosts || !env.guests?.hostB) throw new Error(`the lab env in ${env.dir} has no host B: run npm run lab:up`);
const vars = env.raw;
const g4 = env.guests.hostB;

let hA: Harness;
let hB: Harness;
let snap: SnapshotResult;
const ceph = new CephView(vars);

async function virsh(host: LabHostEnv, ...args: string[]): Promise<string> {
  return (await run('virsh', ['-q', '-c', host.libvirt.uri, ...args])).stdout.trim();
}

const state = (host: LabHostEnv, domain: string) => virsh(host, 'domstate', domain).catch(() => 'absent');

/** The CLI as an operator runs it on a host: that host's libvirtd, its host id. */
const cliOn = (host: LabHostEnv) => cliEnv(vars, { VMSNAP_HOST: host.name, VMSNAP_LIBVIRT_URI: host.libvirt.uri });

/** The guest's definition back as lab:up made it, on hv-b, if a cell (or old code) changed it. */
async function g4AsBefore(disk: string): Promise<void> {
  const xml = await virsh(hosts!.b, 'dumpxml', '--inactive', g4).catch(() => '');
  if ((await state(hosts!.b, g4)) === 'running' && xml.includes(`name='${disk}'`)) return;
  await labGuestRecreate(vars, g4);
}

beforeAll(async () => {
  hA = await startHarness({ host: hosts.a.name, labHost: 'a', config: { fleetBeatMs: 1000 } });
  // hv-b's worker serves /metrics, read after the snapshot its run made (issue 30).
  hB = await startHarness({ host: hosts.b.name, labHost: 'b', config: { fleetBeatMs: 1000, metricsPort: await freePort() } });
  await until(
    'both hosts in the registry, serving',
    async () =>
      (await listHosts(hA.client)).filter(
        (h) => (h.host === hosts.a.name || h.host === hosts.b.name) && h.drainingSince === undefined,
      ).length === 2,
    120_000,
  );
  expect(await state(hosts.b, g4)).toBe('running');
  snap = await hA.client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: uniqueId(`snap-${g4}`), args: [{ domain: g4, quiesce: 'require' }] });
}, 600_000);

afterAll(async () => {
  if (snap) await ceph.removeResultImages(snap);
  await hB?.stop();
  await hA?.stop();
}, 300_000);

const g4Disk = () => snap.disks[0]!.source;

describe('the snapshot on its host’s /metrics', () => {
  it('hv-b’s worker, which froze g4: one freeze window or more, the run’s end, its quiesced success, nothing left frozen', async () => {
    const res = await fetch(hB.hw.metricsUrl!);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    parseExposition(text); // HELP and TYPE once per family, every sample in one
    const windows = sample(text, 'vmsnap_freeze_window_seconds_count');
    expect(windows).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'vmsnap_freeze_window_seconds_sum') / windows).toBeGreaterThan(0);
    expect(sample(text, 'vmsnap_freeze_window_seconds_sum') / windows).toBeLessThan(30);
    expect(sample(text, 'vmsnap_runs_total{outcome="succeeded",failure_type="none"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'vmsnap_snapshots_total{quiesced="true"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, `vmsnap_last_quiesced_success_timestamp_seconds{domain="${g4}"}`)).toBeGreaterThanOrEqual(Date.parse(snap.frozenAt!) / 1000);
    expect(sample(text, 'vmsnap_thaws_total{layer="workflow"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'vmsnap_guests_frozen')).toBe(0);
    expect(sample(text, 'vmsnap_ceph_up')).toBe(1);
    expect(sample(text, 'vmsnap_temporal_up')).toBe(1);
  });
});

describe('restore in the fleet', () => {
  it('in place refuses while the VM runs on another host, even beside a stale shut-off definition of it here: nothing created', async () => {
    // The same definition (same UUID) left shut off on hv-a, as after an evacuation by hand.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-stale-'));
    const xml = path.join(dir, 'g4.xml');
    writeFileSync(xml, await virsh(hosts.b, 'dumpxml', '--inactive', g4));
    const vmsBefore = await ceph.images('vms');
    await virsh(hosts.a, 'define', xml);
    const id = uniqueId('restore-stale');
    try {
      expect(await state(hosts.a, g4)).toBe('shut off');
      const r = await vmsnapCli(['restore', g4, '--from', snap.workflowId, '--wait', '--json', '--workflow-id', id], cliOn(hosts.a), 300_000);
      expect(r.code, r.stdout + r.stderr).toBe(2);
      const out = json<{ type: string; message: string }>(r);
      expect(out.type).toBe('DomainRunning');
      expect(out.message).toContain(`running on ${hosts.b.name}`);
      expect(await ceph.images('vms')).toEqual(vmsBefore);
      expect(await state(hosts.b, g4)).toBe('running');
      expect(await state(hosts.a, g4)).toBe('shut off');
    } finally {
      await virsh(hosts.a, 'destroy', g4).catch(() => undefined);
      await virsh(hosts.a, 'undefine', g4).catch(() => undefined);
      for (const img of await ceph.images('vms')) if (!vmsBefore.includes(img)) await ceph.removeImage('vms', img);
      await g4AsBefore(g4Disk());
    }
  }, 600_000);

  let busyRestoreId = '';
  it('a snapshot and an in-place restore of one VM are serialised: the restore meets the snapshot’s lock and changes nothing; the snapshot stays quiesced', async () => {
    const faultDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-restore-busy-'));
    // Both workers run in this process: the snapshot's freeze activity holds 40 s inside its window
    // on hv-b (deadline 60 s; the activity's own timeout, agent + snapshot timeouts + 5 s, is 55 s),
    // long enough for a CLI on a loaded host to reach the lock; released once it has.
    Object.assign(process.env, { VMSNAP_FAULT_POINTS: 'freeze:after', VMSNAP_FAULT_DIR: faultDir, VMSNAP_FAULT_PAUSE_MS: '40000' });
    const vmsBefore = await ceph.images('vms');
    const snapping = await hA.client.workflow.start('consistentSnapshot', {
      taskQueue: FLEET_TASK_QUEUE,
      workflowId: uniqueId(`snap-busy-${g4}`),
      args: [{ domain: g4, quiesce: 'require', freezeDeadlineMs: 60_000, agentTimeoutSec: 30, snapshotTimeoutMs: 20_000 }],
    });
    busyRestoreId = uniqueId('restore-busy');
    try {
      await until('the snapshot inside its freeze window', async () => existsSync(path.join(faultDir, 'freeze_after')), 120_000);
      delete process.env.VMSNAP_FAULT_POINTS;
      const r = await vmsnapCli(['restore', g4, '--from', snap.workflowId, '--stop', '--shutdown-timeout-ms', '5000', '--wait', '--json', '--workflow-id', busyRestoreId], cliOn(hosts.a), 300_000);
      const out = json<{ type: string; message: string }>(r);
      expect(out.type, r.stdout + r.stderr).toBe('DomainBusy');
      expect(out.message).toMatch(/in progress/);
      // Refused before its stop step: the guest was never asked to shut down.
      expect(await state(hosts.b, g4)).toBe('running');
      releaseFaultPoint(faultDir, 'freeze:after'); // the restore has met the lock: the window may close
      const result = (await snapping.result()) as SnapshotResult;
      expect(result.quiesced).toBe(true);
      expect(await quiescedTruthViolations(vars, result)).toEqual([]);
      await ceph.removeResultImages(result);
      expect(await ceph.images('vms')).toEqual(vmsBefore);
      // The restore ran on the VM's host, not on the host its CLI was started on.
      expect((await hA.client.workflow.getHandle(`${busyRestoreId}.on.${hosts.b.name}`).describe()).status.name).toBe('FAILED');
    } finally {
      delete process.env.VMSNAP_FAULT_POINTS;
      await snapping.terminate('test done').catch(() => undefined);
      await g4AsBefore(g4Disk());
    }
  }, 900_000);

  it('--confirm is refused unless the restore COMPLETED (a failed one replaced nothing to drop)', async () => {
    expect(busyRestoreId).not.toBe('');
    const r = await vmsnapCli(['restore', g4, '--confirm', busyRestoreId, '--json'], cliOn(hosts.b));
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toContain('the restore is FAILED');
  }, 120_000);

  it('--as from hv-a’s CLI: the new VM is defined and started beside its source on hv-b, by the child there', async () => {
    const name = `${g4}-copy`;
    const id = uniqueId('restore-as-fleet');
    let result: RestoreResult | undefined;
    try {
      const r = await vmsnapCli(['restore', g4, '--from', snap.workflowId, '--as', name, '--wait', '--json', '--workflow-id', id], cliOn(hosts.a), 600_000);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      result = json<RestoreResult>(r);
      expect(result.workflowId).toBe(id);
      expect(await state(hosts.b, name)).toBe('running');
      expect(await state(hosts.a, name)).toBe('absent');
      expect((await hA.client.workflow.getHandle(`${id}.on.${hosts.b.name}`).describe()).status.name).toBe('COMPLETED');
      // Named after the id the caller started, not the child's.
      expect(result.disks[0]!.disk).toContain(name);
    } finally {
      for (const h of [hosts.a, hosts.b]) {
        await virsh(h, 'destroy', name).catch(() => undefined);
        await virsh(h, 'undefine', name).catch(() => undefined);
      }
      for (const img of await ceph.images('vms')) if (img.startsWith(`${name}-`)) await ceph.removeImage('vms', img);
      expect(result?.disks.length).toBeGreaterThan(0);
    }
  }, 900_000);

  it('verify: with no room on the source VM’s host (hv-b’s reserve above its memory) the copy runs on hv-a; verified; nothing left', async () => {
    const id = uniqueId('verify-room');
    const vmsBefore = await ceph.images('vms');
    // The worker reads its reserve at each presence answer: hv-b now keeps every byte for itself.
    const reserve = hB.hw.deps.memoryReserveMiB;
    hB.hw.deps.memoryReserveMiB = 16 * 1024 * 1024;
    try {
      const r = await vmsnapCli(['verify', g4, '--from', snap.workflowId, '--wait', '--json', '--workflow-id', id], cliOn(hosts.a), 600_000);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const v = json<VerifyResult>(r);
      expect(v.verdict).toBe('verified');
      expect((await hA.client.workflow.getHandle(`${id}.copy.on.${hosts.a.name}`).describe()).status.name).toBe('COMPLETED');
      await expect(hA.client.workflow.getHandle(`${id}.copy.on.${hosts.b.name}`).describe()).rejects.toThrow(/not found/i);
      for (const h of [hosts.a, hosts.b]) expect(await state(h, v.copy)).toBe('absent');
      expect(await ceph.images('vms')).toEqual(vmsBefore);
      expect(await state(hosts.b, g4)).toBe('running');
      // The last verified set of the VM: a metric on the worker that recorded it, and a search.
      const series = (await Promise.all([hA, hB].map((h) => h.hw.deps.metrics.render()))).join('\n');
      const at = Number(new RegExp(`^vmsnap_last_verified_timestamp_seconds\\{domain="${g4}"\\} (\\d+)$`, 'm').exec(series)?.[1]);
      expect(Math.abs(at - Date.parse(v.at) / 1000)).toBeLessThan(1);
      expect(series).toMatch(/^vmsnap_verifications_total\{verdict="verified"\} [1-9]/m);
      const query = `WorkflowType = "verifySnapshot" AND VmsnapDomain = "${g4}" AND VmsnapResult = "succeeded"`;
      await until('the verify run found by its search attributes', async () => {
        for await (const w of hA.client.workflow.list({ query })) if (w.workflowId === id) return true;
        return false;
      }, 30_000);
    } finally {
      hB.hw.deps.memoryReserveMiB = reserve;
    }
  }, 900_000);

  it('verify terminated during its check: the copy still runs with nobody to discard it; its host’s reaper ends it and removes its disks', async () => {
    const handle = await hA.client.workflow.start('verifySnapshot', {
      taskQueue: FLEET_TASK_QUEUE,
      workflowId: uniqueId('verify-killed'),
      args: [{ domain: g4, from: snap.workflowId, check: ['sleep', '600'], checkTimeoutMs: 900_000 }],
    });
    const copy = copyName(g4, handle.firstExecutionRunId);
    const onHost = hA.client.workflow.getHandle(`${handle.workflowId}.copy.on.${hosts.b.name}`);
    const disks = () => ceph.images('vms').then((all) => all.filter((i) => i.startsWith(`${copy}-`)));
    try {
      await until('the copy in its check', async () => (await onHost.query<ProgressView>('progress').catch(() => undefined))?.phase === 'check', 600_000);
      expect(await state(hosts.b, copy)).toBe('running');
      expect((await disks()).length).toBeGreaterThan(0);
      await handle.terminate('test: a verify that never finished');
      // The parent-close policy reaches the children shortly after.
      await until('the copy’s restore terminated with its verify', async () => (await onHost.describe()).status.name === 'TERMINATED', 60_000);
      expect(await state(hosts.b, copy)).toBe('running');
      const reaper = new OrphanReaper(hB.hw.deps, hB.client, 'images', hB.hw.deps.log, 3600_000, 3600_000, 3600_000);
      const removed: string[] = [];
      // The copy's QEMU held its disks' exclusive locks: a disk may be kept one sweep, until Ceph lets go.
      await until('the copy and its disks gone', async () => {
        removed.push(...(await reaper.sweep()).restore.removed);
        return (await state(hosts.b, copy)) === 'absent' && (await disks()).length === 0;
      }, 180_000);
      expect(removed.some((r) => r.startsWith(`domain ${copy} (throw-away copy`)), removed.join('; ')).toBe(true);
      expect(await state(hosts.b, g4)).toBe('running');
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await virsh(hosts.b, 'destroy', copy).catch(() => undefined);
      await virsh(hosts.b, 'undefine', copy).catch(() => undefined);
      for (const img of await disks()) await ceph.removeImage('vms', img);
    }
  }, 900_000);
});
