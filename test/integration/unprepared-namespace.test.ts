import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import { SEARCH_ATTRIBUTE_TYPES } from '../../src/model/search-attributes';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { ensureThawed } from '../helpers/guest';
import { temporalBinary } from '../../support/fast/temporal-binary';
import { quiescedTruthViolations } from '../helpers/truth';
import { labVars, need } from '../../support/lab/env';
import { VERSION } from '../../src/version';

/*
 * A Temporal namespace nobody prepared for vmsnap, as a real cluster is: a dev server of its own,
 * started WITHOUT vmsnap's search attributes (the lab's registers them). Every command that meets
 * the gap says so in one line naming `vmsnap setup` (exit 4); `vmsnap setup` registers them, twice
 * is harmless, and then the same snapshot is quiesced (checked on the image, not on the result).
 */
let server: { address: string; proc: ChildProcess };
let env: NodeJS.ProcessEnv;
let h: Harness | undefined;
let vars: Record<string, string>;
let g1: string;

beforeAll(async () => {
  vars = labVars();
  g1 = need(vars, 'VMSNAP_GUEST_1DISK');
  server = await startBareServer();
  env = cliEnv(vars, { VMSNAP_TEMPORAL_ADDRESS: server.address });
}, 60_000);
afterAll(async () => {
  await ensureThawed(vars, g1);
  await h?.stop();
  server?.proc.kill('SIGKILL');
});

/**
 * `temporal server start-dev` with no --search-attribute, in memory, on a free port. Not
 * TestWorkflowEnvironment: that installs the SDK's Runtime, and the host worker installs its own.
 */
async function startBareServer(): Promise<{ address: string; proc: ChildProcess }> {
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const proc = spawn(temporalBinary(), ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless', '--namespace', 'default'], { stdio: 'ignore' });
  const address = `127.0.0.1:${port}`;
  for (let t0 = Date.now(); Date.now() - t0 < 30_000; await new Promise((r) => setTimeout(r, 200))) {
    const c = await Connection.connect({ address, connectTimeout: 1000 }).catch(() => undefined);
    if (!c) continue;
    const ok = await c.workflowService.describeNamespace({ namespace: 'default' }).then(() => true, () => false);
    await c.close();
    if (ok) return { address, proc };
  }
  proc.kill('SIGKILL');
  throw new Error(`the bare Temporal dev server did not answer on ${address} within 30 s`);
}

const oneLine = /^vmsnap: Temporal namespace "default" is not prepared for vmsnap \(search attributes? [A-Za-z, ]+ not registered\): run `vmsnap setup`\n$/;

describe('an unprepared Temporal namespace', () => {
  it('snapshot, schedule create and the worker say "run `vmsnap setup`" in one line, exit 4', async () => {
    const snap = await vmsnapCli(['snapshot', g1, '--host', 'nowhere', '--workflow-id', uniqueId('unprep')], env);
    expect(snap.stderr).toMatch(oneLine);
    expect(snap.code).toBe(4);
    const sched = await vmsnapCli(['schedule', 'create', uniqueId('unprep'), '--domain', g1, '--every', '1h'], env);
    expect(sched.stderr).toMatch(oneLine);
    expect(sched.code).toBe(4);
    // The worker refuses before polling (a run would fail its first search-attribute upsert).
    await expect(startHarness({ temporalAddress: server.address })).rejects.toThrow(/not prepared for vmsnap .*run `vmsnap setup`/);
  });

  it('vmsnap setup registers them, a second run changes nothing, and then a snapshot is quiesced', async () => {
    const setup = await vmsnapCli(['setup', '--json'], env);
    expect(setup.code, setup.stderr).toBe(0);
    expect(json<{ added: string[] }>(setup).added.sort()).toEqual(Object.keys(SEARCH_ATTRIBUTE_TYPES).sort());
    const again = await vmsnapCli(['setup'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/already prepared .*nothing to do/);

    h = await startHarness({ temporalAddress: server.address });
    // doctor's first line is the version, so a pasted report says which vmsnap wrote it.
    const doctor = await vmsnapCli(['doctor', '--host', h.config.host, '--domain', g1, '--json'], env);
    const first = json<{ checks: { name: string; status: string; detail: string }[] }>(doctor).checks[0];
    expect(first).toMatchObject({ name: 'vmsnap', status: 'ok', detail: `version ${VERSION}` });
    const r = await vmsnapCli(['snapshot', g1, '--host', h.config.host, '--quiesce', 'require', '--workflow-id', uniqueId('prepared'), '--wait', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    const result = json<SnapshotResult>(r);
    expect(result.quiesced).toBe(true);
    expect(await quiescedTruthViolations(vars, result)).toEqual([]);
    await new CephView(vars).removeResultImages(result);

    // The README's first schedule, as typed there (03:00: it does not fire during the test).
    const id = uniqueId('nightly');
    const sched = await vmsnapCli(['schedule', 'create', id, '--domain', g1, '--cron', '0 3 * * *', '--keep-last', '7'], env);
    expect(sched.code, sched.stderr).toBe(0);
    expect((await vmsnapCli(['schedule', 'delete', id], env)).code).toBe(0);
  }, 240_000);
});
