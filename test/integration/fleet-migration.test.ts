import { listHosts } from '../../src/worker/fleet-index';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { CliError, run } from '../../support/lab/cli-tools';
import { labHostWorkerEnv, loadLabEnv } from '../../support/lab/env';
import type { LabHostEnv } from '../../support/lab/env';
import { longestGap, readTicks } from '../../support/lab/probe';
import { FLEET_TASK_QUEUE, isAlive } from '../../src/model/fleet';
import type { FleetHost } from '../../src/model/fleet';
import type { SnapshotResult } from '../../src/model/types';
import { progressQuery } from '../../workflows/progress';
import { runIdPrefix } from '../../src/cli/schedule/common';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { failureOf } from '../helpers/failure-of';
import { startHarness, uniqueId } from '../helpers/harness';
import { holdTurn } from '../helpers/limit-turns';
import type { Harness } from '../helpers/harness';
import { quiescedTruthViolations } from '../helpers/truth';
import { WorkerProcess } from '../helpers/worker-process';
import { until } from '../helpers/until';
import { extendedDescribe, repetitions } from '../helpers/lanes';

/*
 * The fleet across live migrations, on the lab's two hypervisor hosts (lab/libvirt.sh): a worker
 * per host, runs started by VM name, and the VM moved (lab/migrate.sh) at chosen points of a run.
 * Every cell checks the promises, not the path the run took: the guest ends thawed on the host it
 * runs on, its probe never stalls longer than the freeze deadline + 2 s, `quiesced: true` only for
 * images whose ext4 is clean, and no vmsnap snapshot is left on its disks.
 */
const env = loadLabEnv();
const hosts = env.hosts;
const migrateSh = env.guests?.migrate;
if (!hosts || !migrateSh || !env.guests?.hostB) throw new Error(`the lab env in ${env.dir} has no host B: run npm run lab:up`);
const vars = env.raw;
const g1 = env.guests.oneDisk;
const g3 = env.guests.threeDisk;
const g4 = env.guests.hostB;
const DEADLINE_MS = 8000;
const ROOT = path.resolve(__dirname, '../..');
const WINDOW = { freezeDeadlineMs: DEADLINE_MS, snapshotTimeoutMs: 5000, agentTimeoutSec: 3 };
/** lab/migrate.sh: the guest crashed after the move (TCG), a lab artefact, not a vmsnap verdict. */
const LAB_CRASH = 3;

let hA: Harness;
let hB: Harness | undefined;
let client: Client;
const ceph = new CephView(vars);

class LabCrash extends Error {}

/** paused: not live (lab notes: TCG guests have crashed after live moves, never after paused ones). */
async function migrate(domain: string, to: 'a' | 'b', o: { paused?: boolean } = {}): Promise<string> {
  try {
    return (await run('bash', [migrateSh!, domain, to, ...(o.paused ? ['--paused'] : [])], 180_000)).stdout;
  } catch (err) {
    if (err instanceof CliError && err.exitCode === LAB_CRASH) {
      await run('bash', [path.join(ROOT, 'lab/guests.sh'), 'recreate', domain], 180_000).catch(() => undefined);
      throw new LabCrash(`lab crash moving ${domain} to ${to} (recreated): ${err.message}`);
    }
    throw err;
  }
}

async function virsh(host: LabHostEnv, ...args: string[]): Promise<string> {
  return (await run('virsh', ['-q', '-c', host.libvirt.uri, ...args])).stdout;
}

async function whereRuns(domain: string): Promise<LabHostEnv> {
  for (const h of [hosts!.a, hosts!.b]) if ((await virsh(h, 'list', '--name', '--state-running')).split('\n').map((s) => s.trim()).includes(domain)) return h;
  throw new Error(`${domain} runs on no lab host`);
}

async function freezeStatusWhereItRuns(domain: string): Promise<string> {
  const h = await whereRuns(domain);
  const out = await virsh(h, 'qemu-agent-command', '--timeout', '10', domain, JSON.stringify({ execute: 'guest-fsfreeze-status' }));
  return (JSON.parse(out) as { return: string }).return;
}

/** Puts the guest back on its home host after a cell, whatever happened. */
async function home(domain: string, to: 'a' | 'b', o: { paused?: boolean } = {}): Promise<void> {
  if ((await whereRuns(domain)).name !== hosts![to].name) await migrate(domain, to, o);
}

async function fleet(): Promise<FleetHost[]> {
  return listHosts(client);
}

/** The phase of the run on the VM's host (the router's child), once it has one. */
async function childPhase(routerId: string): Promise<string | undefined> {
  const p = await client.workflow.getHandle(routerId).query(progressQuery);
  if (!p.delegatedTo) return undefined;
  return (await client.workflow.getHandle(p.delegatedTo.workflowId).query(progressQuery)).phase;
}

/** The invariants every cell ends with. */
async function expectPromisesKept(domain: string, result: SnapshotResult | undefined, from: number, to: number): Promise<void> {
  expect(await freezeStatusWhereItRuns(domain)).toBe('thawed');
  const gap = longestGap(await readTicks(domain, from - 2000), from, to);
  console.log(
    `[fleet-migration] ${expect.getState().currentTestName}: longest probe stall ${gap?.ms ?? 0} ms, ` +
      `host ${result?.host}, quiesced=${result?.quiesced} (${result?.quiesceReason}), relocations ${JSON.stringify(result?.relocations ?? [])}`,
  );
  expect(gap?.ms ?? 0, `longest probe stall ${JSON.stringify(gap)}`).toBeLessThanOrEqual(DEADLINE_MS + 2000);
  if (result) expect(await quiescedTruthViolations(vars, result)).toEqual([]);
  const keep = new Set(result?.disks.map((d) => d.snapshot.split('@')[1]) ?? []);
  for (const d of (await virsh(await whereRuns(domain), 'domblklist', domain, '--details')).split('\n')) {
    const m = /network\s+disk\s+(\S+)\s+(\S+)\/(\S+)/.exec(d.trim());
    if (!m) continue;
    const left = (await ceph.vmsnapSnaps(m[2]!, m[3]!)).filter((s) => !keep.has(s));
    expect(left, `stray vmsnap snapshots on ${m[2]}/${m[3]}`).toEqual([]);
  }
}

beforeAll(async () => {
  const config = { fleetBeatMs: 1000, maxWindowsPerHost: 1 };
  hA = await startHarness({ host: hosts.a.name, labHost: 'a', config });
  hB = await startHarness({ host: hosts.b.name, labHost: 'b', config });
  client = hA.client;
  await until('both hosts in the registry', async () => (await fleet()).filter((h) => h.host === hosts.a.name || h.host === hosts.b.name).length === 2 || undefined, 20_000, 100);
});

afterAll(async () => {
  await hB?.stop();
  await hA?.stop();
});

describe('runs by VM name on two hosts', () => {
  it('a VM on host B, through the Temporal client and the CLI: run on B, quiesced, truthful', async () => {
    const from = Date.now();
    const viaClient = (await client.workflow.execute('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: uniqueId('fm-b'), args: [{ domain: g4, quiesce: 'require' }] })) as SnapshotResult;
    const r = await vmsnapCli(['snapshot', g4, '--wait', '--json', '--workflow-id', uniqueId('fm-b-cli')], cliEnv(vars));
    expect(r.code, r.stderr).toBe(0);
    const viaCli = json<SnapshotResult>(r);
    try {
      for (const res of [viaClient, viaCli]) {
        expect(res.host).toBe(hosts.b.name);
        expect(res.quiesced).toBe(true);
      }
      await expectPromisesKept(g4, viaClient, from, Date.now());
      expect(await quiescedTruthViolations(vars, viaCli)).toEqual([]);
    } finally {
      await ceph.removeResultImages(viaClient);
      await ceph.removeResultImages(viaCli);
    }
  });
});

/** Each migration cell once in the default lane, 3 times in the extended one (or VMSNAP_FAULT_RUNS). */
const RUNS = repetitions(process.env.VMSNAP_FAULT_RUNS, 1, 3);
function cell(name: string, fn: () => Promise<void>): void {
  for (let i = 1; i <= RUNS; i++) it(RUNS > 1 ? `${name} (run ${i}/${RUNS})` : name, fn);
}

describe('migrations at chosen points of a run', () => {
  cell('before the freeze: the run follows the VM to its new host (one relocation in the history)', async () => {
    // Hold host A's only freeze-window turn, so the run waits between inspection and its freeze.
    const blocker = await holdTurn(client, 'window', hosts.a.name, 1, uniqueId('blocker'));
    const id = uniqueId('fm-before');
    const from = Date.now();
    let result: SnapshotResult | undefined;
    try {
      const handle = await client.workflow.start('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: g1, ...WINDOW, quiesce: 'require' }] });
      // The child on A has inspected and locked, and now waits for its turn.
      await until('the run on host A to wait for its slot', async () => ((await childPhase(id)) === 'lock' ? true : undefined), 60_000, 100);
      await new Promise((r) => setTimeout(r, 1500));
      await migrate(g1, 'b');
      await blocker.release();
      result = (await handle.result()) as SnapshotResult;
      expect(result.host).toBe(hosts.b.name);
      expect(result.relocations?.map((m) => m.from)).toEqual([hosts.a.name]);
      expect(result.quiesced).toBe(true);
      await expectPromisesKept(g1, result, from, Date.now());
      // The move is in the history: the child on A failed, the one on B completed.
      expect((await client.workflow.getHandle(`${id}.on.${hosts.a.name}`).describe()).status.name).toBe('FAILED');
      expect((await client.workflow.getHandle(`${id}.on.${hosts.b.name}.1`).describe()).status.name).toBe('COMPLETED');
    } finally {
      await blocker.release();
      await ceph.removeResultImages(result);
      await home(g1, 'a');
    }
  });

  cell('inside the window (freeze call in flight): thawed where the guest runs, within deadline + 2 s, truthful', async () => {
    await run('bash', [path.join(ROOT, 'lab/guest-ctl.sh'), g1, 'slow-freeze', '3']);
    const id = uniqueId('fm-window');
    const from = Date.now();
    let result: SnapshotResult | undefined;
    try {
      const handle = await client.workflow.start('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: g1, ...WINDOW, quiesce: 'prefer' }] });
      // The window runs as local activities inside one workflow task, so no query sees it: the
      // freeze journal entry host A writes just before the freeze call does.
      await until('the freeze to start on host A', async () => ((await hA.hw.deps.guard.entries()).length ? true : undefined), 60_000, 100);
      await migrate(g1, 'b');
      result = (await handle.result()) as SnapshotResult;
      await expectPromisesKept(g1, result, from, Date.now());
      // The freeze on A died with the move ("agent disappeared") and the run followed the VM. On
      // B the guest's freeze hook still sleeps 3 s, past the 3 s agent timeout: that freeze times
      // out too, and the run says so (quiesced:false, checked truthful above) rather than wait.
      expect(result.host).toBe(hosts.b.name);
      expect(result.relocations?.length).toBe(1);
      expect(result.quiesced).toBe(false);
      expect(result.quiesceReason).toMatch(/freeze failed: .*not available for now/);
      // Host A forgot the freeze only once it was proven thawed where the guest runs.
      expect(await hA.hw.deps.guard.entries()).toEqual([]);
    } finally {
      await run('bash', [path.join(ROOT, 'lab/guest-ctl.sh'), g1, 'slow-freeze', '0']).catch(() => undefined);
      await ceph.removeResultImages(result);
      await home(g1, 'a');
    }
  });

  cell('while frozen (between the freeze and the snapshot): the guest migrates frozen and is thawed where it lands, truthfully', async () => {
    // Host A's worker stalls 3 s after the freeze returned (fault point freeze:after): the VM is
    // moved while frozen, and the snapshot and thaw come after or during the move.
    const faultDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-fm-fault-'));
    Object.assign(process.env, { VMSNAP_FAULT_POINTS: 'freeze:after', VMSNAP_FAULT_DIR: faultDir, VMSNAP_FAULT_PAUSE_MS: '3000' });
    const id = uniqueId('fm-frozen');
    const from = Date.now();
    let result: SnapshotResult | undefined;
    try {
      const handle = await client.workflow.start('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: g1, ...WINDOW, quiesce: 'prefer' }] });
      await until('the guest frozen on host A', async () => (existsSync(path.join(faultDir, 'freeze_after')) ? true : undefined), 60_000, 100);
      delete process.env.VMSNAP_FAULT_POINTS; // one stall only (host B's worker shares this process)
      await migrate(g1, 'b');
      result = (await handle.result()) as SnapshotResult;
      expect(result.host).toBe(hosts.a.name);
      await expectPromisesKept(g1, result, from, Date.now());
      expect(await hA.hw.deps.guard.entries()).toEqual([]);
    } finally {
      for (const k of ['VMSNAP_FAULT_POINTS', 'VMSNAP_FAULT_DIR', 'VMSNAP_FAULT_PAUSE_MS']) delete process.env[k];
      await ceph.removeResultImages(result);
      await home(g1, 'a');
    }
  });

  cell('during the copy: the copy just finishes, quiesced and truthful', async () => {
    const id = uniqueId('fm-copy');
    const from = Date.now();
    let result: SnapshotResult | undefined;
    try {
      const handle = await client.workflow.start('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: g3, quiesce: 'require', verify: true }] });
      const phase = await until('the copy', async () => {
        const p = (await childPhase(id)) ?? '';
        return ['clone', 'flatten', 'finalize'].includes(p) ? p : undefined;
      }, 60_000, 100);
      await migrate(g3, 'b');
      result = (await handle.result()) as SnapshotResult;
      expect(result.host, `moved during ${phase}; relocations ${JSON.stringify(result.relocations)}`).toBe(hosts.a.name);
      expect(result.quiesced).toBe(true);
      expect(result.disks.every((d) => !!d.sha256)).toBe(true);
      await expectPromisesKept(g3, result, from, Date.now());
    } finally {
      await ceph.removeResultImages(result);
      await home(g3, 'a');
    }
  });
});

extendedDescribe('a schedule by VM name across a live migration', () => {
  // Extended lane: the default lane's schedule by VM name is the evacuation below.
  it('every 20 s: every run succeeds before and after the VM moves, retention holds', async () => {
    const id = uniqueId('fm-sched');
    const r = await vmsnapCli(['schedule', 'create', id, '--domain', g4, '--every', '20s', '--keep-last', '2', '--quiesce', 'require', '--json'], cliEnv(vars));
    expect(r.code, r.stderr).toBe(0);
    const runsOf = async () => {
      const out: { id: string; status: string }[] = [];
      for await (const w of client.workflow.list({ query: `WorkflowId STARTS_WITH "${runIdPrefix(id)}" AND WorkflowType = "consistentSnapshot"` })) {
        if (!w.workflowId.includes('.on.')) out.push({ id: w.workflowId, status: w.status.name });
      }
      return out;
    };
    try {
      await until('a first scheduled run to complete', async () => ((await runsOf()).some((w) => w.status === 'COMPLETED') ? true : undefined), 90_000, 100);
      await migrate(g4, 'a');
      const movedAt = Date.now();
      await until('two more runs after the move', async () => ((await runsOf()).filter((w) => w.status === 'COMPLETED').length >= 3 ? true : undefined), 120_000, 100);
      await client.schedule.getHandle(id).pause('test done');
      const runs = await runsOf();
      expect(runs.filter((w) => w.status !== 'COMPLETED' && w.status !== 'RUNNING'), JSON.stringify(runs)).toEqual([]);
      // The runs after the move ran on host A.
      const hostsUsed = new Set<string>();
      for (const w of runs.filter((x) => x.status === 'COMPLETED')) hostsUsed.add(((await client.workflow.getHandle(w.id).result()) as SnapshotResult).host);
      expect([...hostsUsed].sort()).toEqual([hosts.a.name, hosts.b.name].sort());
      expect(Date.now() - movedAt).toBeGreaterThan(0);
      // keep-last 2: the schedule's images are at most 2 per disk.
      const images = (await ceph.images('images')).filter((n) => n.startsWith(g4));
      const mine: string[] = [];
      for (const n of images) if ((await ceph.meta('images', n))['vmsnap.label.schedule'] === id) mine.push(n);
      expect(mine.length).toBeLessThanOrEqual(2);
    } finally {
      await client.schedule.getHandle(id).delete().catch(() => undefined);
      await home(g4, 'b');
    }
  });
});

describe('a host that disappears', () => {
  it('its worker SIGKILLed mid-copy and never back: past its loss threshold the run fails HostLost, retryable, and its child there is terminated', async () => {
    // Host B's worker as its own process, stalled in flatten, so it can die like a host does. Its
    // loss threshold is 15 s here (10 min by default): a restart inside it loses no run.
    await hB!.stop();
    hB = undefined;
    const w = new WorkerProcess(vars, hosts.b.name, { ...labHostWorkerEnv(vars, 'b'), VMSNAP_FLEET_BEAT_MS: '1000', VMSNAP_FLEET_HOST_LOST_AFTER_MS: '15000' });
    await w.start({ points: ['flatten:progress'], pauseMs: 600_000 });
    const id = uniqueId('fm-lost');
    try {
      await until('host B back in the registry', async () => ((await fleet()).some((h) => h.host === hosts.b.name && h.identity.endsWith(`/${w.pid}`)) ? true : undefined), 20_000, 100);
      const handle = await client.workflow.start('consistentSnapshot', { taskQueue: FLEET_TASK_QUEUE, workflowId: id, args: [{ domain: g4, quiesce: 'require' }] });
      await w.reached('flatten:progress');
      await w.kill();
      const f = await failureOf(handle.result());
      expect(f.type).toBe('HostLost');
      expect(f.nonRetryable).toBe(false);
      expect((await client.workflow.getHandle(`${id}.on.${hosts.b.name}`).describe()).status.name).toBe('TERMINATED');
      expect(await freezeStatusWhereItRuns(g4)).toBe('thawed');
    } finally {
      await w.kill().catch(() => undefined);
      for (const n of (await ceph.images('images')).filter((x) => x.startsWith(g4))) {
        if ((await ceph.meta('images', n))['vmsnap.workflow-id'] === id) await ceph.removeImage('images', n);
      }
    }
  }, 240_000);

  it('with its worker dead, its VM restarted on host A: the schedule by VM name keeps running there', async () => {
    // The previous cell left host B without a worker (lost to the fleet after 3 missed beats);
    // the VM is brought up on A, as an operator evacuating a dead host would (a paused move: the
    // VM is not running in between, as in a restart; the live case has its own cells above).
    await until('host B lost to the fleet', async () => ((await fleet()).some((h) => h.host === hosts.b.name && !isAlive(h, Date.now())) ? true : undefined), 30_000, 100);
    await migrate(g4, 'a', { paused: true });
    const id = uniqueId('fm-evac');
    const r = await vmsnapCli(['schedule', 'create', id, '--domain', g4, '--every', '20s', '--quiesce', 'require', '--json'], cliEnv(vars));
    expect(r.code, r.stderr).toBe(0);
    let result: SnapshotResult | undefined;
    try {
      const ended = await until('a scheduled run to end', async () => {
        for await (const w of client.workflow.list({ query: `WorkflowId STARTS_WITH "${runIdPrefix(id)}" AND WorkflowType = "consistentSnapshot"` })) {
          if (!w.workflowId.includes('.on.') && w.status.name !== 'RUNNING') return w;
        }
        return undefined;
      }, 90_000, 100);
      await client.schedule.getHandle(id).pause('test done');
      // A run that failed is a broken promise here, not something to wait out.
      expect(ended.status.name, ended.workflowId).toBe('COMPLETED');
      result = (await client.workflow.getHandle(ended.workflowId).result()) as SnapshotResult;
      expect(result.host).toBe(hosts.a.name);
      expect(result.quiesced).toBe(true);
      expect(await quiescedTruthViolations(vars, result)).toEqual([]);
    } finally {
      await client.schedule.getHandle(id).delete().catch(() => undefined);
      await ceph.removeResultImages(result);
      await home(g4, 'b', { paused: true });
    }
  }, 240_000);
});
