import { execFile, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { SnapshotResult } from '../../src/model/types';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { CephView } from '../helpers/ceph-inspect';
import { ensureThawed, freezeStatus, virsh } from '../helpers/guest';
import { labVars, need } from '../../support/lab/env';
import { sleep } from '../helpers/worker-process';

/*
 * The operator's commands, run as the real CLI process against the lab: snapshot, status, cancel,
 * thaw, worker (metrics + health + graceful stop), help, and what bad flags and unreachable
 * services give.
 */
let h: Harness;
let env: NodeJS.ProcessEnv;
let ceph: CephView;
let g1: string;

beforeAll(async () => {
  h = await startHarness();
  env = cliEnv(h.vars);
  ceph = new CephView(h.vars);
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
});
afterAll(async () => {
  await ensureThawed(h.vars, g1);
  await h?.stop();
});

describe('vmsnap CLI on the lab', () => {
  it('snapshot --wait --json runs the workflow and prints the result; status reports it', async () => {
    const id = uniqueId('cli');
    const r = await vmsnapCli(['snapshot', g1, '--host', h.config.host, '--quiesce', 'require', '--workflow-id', id, '--wait', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    const result = json<SnapshotResult>(r);
    expect(result.quiesced).toBe(true);
    expect(result.disks[0].image).toMatch(/^images\//);
    const s = await vmsnapCli(['status', id, '--json'], env);
    expect(s.code).toBe(0);
    expect(json<{ status: string }>(s).status).toBe('COMPLETED');
    const human = await vmsnapCli(['status', id], env);
    expect(human.stdout).toContain(`${id}: COMPLETED`);

    // vmsnap delete removes the set this real run made (ownership as the run recorded it).
    const images = result.disks.map((d) => d.image!.split('/')[1]!);
    const dry = await vmsnapCli(['delete', g1, '--run', id, '--dry-run', '--json'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(json(dry)).toMatchObject({ dryRun: true, workflowId: id, images, removed: [] });
    expect(await ceph.images('images')).toEqual(expect.arrayContaining(images));
    const del = await vmsnapCli(['delete', g1, '--run', id, '--json'], env);
    expect(del.code, del.stderr).toBe(0);
    expect(json(del)).toMatchObject({ removed: images, left: [] });
    const left = await ceph.images('images');
    for (const img of images) expect(left).not.toContain(img);
  });

  it('the same input works with `temporal workflow start` (README)', async () => {
    const id = uniqueId('tcli');
    const input = JSON.stringify({ domain: g1, quiesce: 'require', target: { clone: false } });
    await new Promise<void>((resolve, reject) =>
      execFile(
        need(h.vars, 'TEMPORAL_BIN'),
        ['workflow', 'start', '--address', need(h.vars, 'TEMPORAL_ADDRESS'), '--type', 'consistentSnapshot', '--task-queue', h.hw.taskQueue, '--workflow-id', id, '--input', input],
        { timeout: 60_000 },
        (err) => (err ? reject(err) : resolve()),
      ),
    );
    const result = (await h.client.workflow.getHandle(id).result()) as SnapshotResult;
    expect(result.quiesced).toBe(true);
    const [pool, image] = result.disks[0].source.split('/');
    const snap = result.disks[0].snapshot.split('@')[1];
    await ceph.rbd('snap', 'rm', `${pool}/${image}@${snap}`);
    await ceph.rbd('image-meta', 'remove', `${pool}/${image}`, `vmsnap.done.${snap}`).catch(() => undefined);
    await ceph.rbd('image-meta', 'remove', `${pool}/${image}`, `vmsnap.snap-owner.${snap}`).catch(() => undefined);
  });

  it('cancel ends a run as cancelled, with nothing left behind', async () => {
    // A host with no worker yet: the run waits, the cancel is recorded, a worker then honours it.
    const host = `cli-${uniqueId('c').slice(2)}`;
    const id = uniqueId('cli-cancel');
    const started = await vmsnapCli(['snapshot', g1, '--host', host, '--workflow-id', id, '--json'], env);
    expect(started.code, started.stderr).toBe(0);
    const c = await vmsnapCli(['cancel', id], env);
    expect(c.code).toBe(0);
    expect(c.stdout).toContain('cancel requested');
    const late = await startHarness({ host });
    try {
      for (let i = 0; i < 120; i++) {
        const s = json<{ status: string }>(await vmsnapCli(['status', id, '--json'], env));
        if (s.status !== 'RUNNING') break;
        await sleep(500);
      }
      const s = await vmsnapCli(['status', id, '--json'], env);
      expect(json<{ status: string }>(s).status).toBe('CANCELLED');
      expect(s.code).toBe(3);
    } finally {
      await late.stop();
    }
    expect((await ceph.images('images')).filter((i) => i.includes(id))).toEqual([]);
  });

  it('thaw thaws a frozen guest through libvirt, without Temporal', async () => {
    await virsh(h.vars, 'domfsfreeze', g1);
    expect(await freezeStatus(h.vars, g1)).toBe('frozen');
    const r = await vmsnapCli(['thaw', g1, '--json'], { ...env, VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(r.code, r.stderr).toBe(0);
    expect(json(r)).toMatchObject({ domain: g1, before: 'frozen', after: 'thawed', thawedBy: 'operator' });
    expect(await freezeStatus(h.vars, g1)).toBe('thawed');
  });

  it('worker serves /healthz and /metrics and stops gracefully on SIGTERM', async () => {
    const port = 19464 + Math.floor(Math.random() * 500);
    const stateDir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-cli-worker-'));
    const proc = spawn(process.execPath, [path.resolve(__dirname, '../../bin/vmsnap.js'), 'worker', '--host', `cli-w-${port}`, '--metrics-port', String(port), '--metrics-address', '127.0.0.1', '--state-dir', stateDir], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    try {
      for (let i = 0; i < 120 && !out.includes('"worker started"'); i++) await sleep(500);
      expect(out).toContain('"worker started"');
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ state: 'RUNNING', bulk: 'RUNNING' });
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/^temporal_/m); // the SDK's own runtime metrics
      expect(metrics).toMatch(/# TYPE vmsnap_/); // and vmsnap's
      expect(metrics).toMatch(/^process_resident_memory_bytes \d+/m); // and the process's
      // One page, three sources: no family twice.
      const types = [...metrics.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]);
      expect(types.filter((t, i) => types.indexOf(t) !== i)).toEqual([]);
      expect(metrics).toMatch(/^vmsnap_ceph_up 1$/m);
      expect(metrics).toMatch(/^vmsnap_temporal_up 1$/m);
      proc.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).toContain('"worker stopped"');
      // Gone for good, as a decommissioned host: left draining, every later file's reaper would
      // wait for its answer (fleetDisksInUse) and its placements stay unsure until it is lost.
      const forgot = await vmsnapCli(['fleet', 'forget', `cli-w-${port}`, '--json'], env);
      expect(forgot.code, forgot.stderr).toBe(0);
    } finally {
      proc.kill('SIGKILL');
    }
  });

  it('every command has --help', async () => {
    const cmds = ['worker', 'snapshot', 'status', 'cancel', 'thaw', 'doctor', 'schedule', 'list', 'prune', 'delete', 'restore', 'verify', 'fleet', 'setup', 'completion', 'arrival-guard'];
    const runs = await Promise.all(cmds.map((cmd) => vmsnapCli([cmd, '--help'], env)));
    runs.forEach((r, i) => {
      expect(r.code, cmds[i]).toBe(0);
      expect(r.stdout, cmds[i]).toMatch(new RegExp(`^Usage: vmsnap ${cmds[i]} `));
    });
    const top = await vmsnapCli(['--help'], env);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^Exit codes:$/m);
  });

  it('bad flags and hostile input exit 2 before contacting anything', async () => {
    const offline = cliEnv(labVars(), { VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1', VMSNAP_LIBVIRT_URI: 'qemu:///system?socket=/nonexistent' });
    const cases = [
      ['snapshot'],
      ['snapshot', 'vm', 'extra'],
      ['snapshot', 'vm', '--bogus'],
      ['snapshot', 'vm', '--quiesce', 'maybe'],
      ['snapshot', 'vm', '--freeze-deadline-ms', '-1'],
      ['nosuchcommand'],
      ['status'],
      ['thaw', 'vm;reboot'],
    ];
    for (const argv of cases) {
      const r = await vmsnapCli(argv, offline);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/^vmsnap: /);
    }
    // Random hostile domain names: every one is refused by the schema, none reaches a service.
    const hostile = fc.sample(
      fc.oneof(fc.constantFrom('../etc', 'a/b', 'a@b', 'a b', '$(id)', '`id`', 'x'.repeat(300), 'ü'), fc.string({ minLength: 1, maxLength: 40 }).filter((s) => !/^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$/.test(s) && !s.startsWith('-'))),
      { numRuns: 8, seed: 42 },
    );
    for (const domain of hostile) {
      const r = await vmsnapCli(['snapshot', domain], offline);
      expect(r.code, JSON.stringify(domain)).toBe(2);
      expect(r.stderr).toMatch(/domain/);
    }
  });

  it('an unreachable Temporal exits 4 with a clear message', async () => {
    const r = await vmsnapCli(['status', 'whatever', '--temporal-address', '127.0.0.1:1'], env);
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/cannot reach Temporal at 127\.0\.0\.1:1/);
  });
});
