import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RadosCluster, cloneImage, createImage, openImage } from '../../src/ceph';
import type { IoCtx } from '../../src/ceph';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, vmsnapCli } from '../helpers/cli';
import type { CliRun } from '../helpers/cli';
import { uniqueId } from '../helpers/harness';
import { labVars, need } from '../../support/lab/env';

/*
 * vmsnap list (every VM, filtered), delete and prune, as the real CLI against the lab's Ceph and
 * Temporal. The image sets are made here, on real images, with the metadata a run writes
 * (test/integration/cli-commands.test.ts deletes a set a real run made); the CLI runs with the
 * restricted client.vmsnap key, as a host does. Every refusal leaves every image as it was.
 */

const POOL = 'images';
const id = uniqueId('life');
const vars = labVars();
const ceph = new CephView(vars);
const env = cliEnv(vars);
const cli = (...argv: string[]) => vmsnapCli(argv, env);

let cluster: RadosCluster;
let io: IoCtx;
let scope: { namespace: string; cluster: string };
/** Images made here, newest first: clones before their parents at cleanup. */
const made: string[] = [];
const t0 = Date.now();
const iso = (ms: number) => new Date(ms).toISOString();

interface SetSpec {
  domain: string;
  uuid?: string;
  createdAt?: number;
  state?: string;
  quiesced?: boolean;
  namespace?: string;
  disks?: number;
}

/** A set as a run leaves it: one image per disk with its protected `snap` and vmsnap's metadata. */
async function makeSet(run: string, s: SetSpec): Promise<string[]> {
  const names: string[] = [];
  for (let d = 0; d < (s.disks ?? 1); d++) {
    const name = `${id}-${run}-vd${String.fromCharCode(97 + d)}`;
    await createImage(io, name, 4 << 20);
    made.unshift(name);
    const img = await openImage(io, name);
    try {
      const meta: Record<string, string | undefined> = {
        'vmsnap.owner': 'vmsnap',
        'vmsnap.image': `${POOL}/${name}`,
        'vmsnap.domain': s.domain,
        'vmsnap.domain-uuid': s.uuid,
        'vmsnap.temporal-namespace': s.uuid ? (s.namespace ?? scope.namespace) : undefined,
        'vmsnap.cluster': s.uuid ? scope.cluster : undefined,
        'vmsnap.workflow-id': `${id}-${run}`,
        'vmsnap.created-at': iso(s.createdAt ?? t0),
        'vmsnap.state': s.state ?? 'complete',
        'vmsnap.quiesced': String(s.quiesced ?? true),
      };
      for (const [k, v] of Object.entries(meta)) if (v !== undefined) await img.setMetadata(k, v);
      if ((s.state ?? 'complete') === 'complete') {
        await img.createSnap('snap');
        await img.protectSnap('snap');
      }
    } finally {
      await img.close();
    }
    names.push(name);
  }
  return names;
}

/** stdout is exactly one JSON document. */
function doc<T = Record<string, unknown>>(r: CliRun): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(`stdout is not one JSON document (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
  }
}

const DAY = 86_400_000;
const VM = { domain: `vm-${id}`, uuid: randomUUID() };
const OTHER_VM = { domain: `other-${id}`, uuid: randomUUID() };
const sets: Record<string, string[]> = {};

let connection: Connection;
let client: Client;

beforeAll(async () => {
  connection = await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS') });
  client = new Client({ connection, namespace: vars.TEMPORAL_NAMESPACE ?? 'default' });
  // The scope the CLI resolves (src/worker/scope.ts): this namespace's id.
  const ns = await client.workflowService.describeNamespace({ namespace: vars.TEMPORAL_NAMESPACE ?? 'default' });
  scope = { namespace: vars.TEMPORAL_NAMESPACE ?? 'default', cluster: `temporal-ns:${ns.namespaceInfo!.id}` };
  // The unfinished set's run is still running (on a queue no worker polls), as a real one in its
  // copy would be: so no worker's orphan reaper takes the set away during the test.
  await client.workflow.start('consistentSnapshot', { taskQueue: `nowhere-${id}`, workflowId: `${id}-unfinished`, args: [{ domain: VM.domain }] });
  cluster = await RadosCluster.connect({ conf: need(vars, 'CEPH_CONF'), id: vars.CEPH_ID ?? 'admin', keyring: need(vars, 'CEPH_KEYRING'), connectTimeoutSec: 10 });
  io = await cluster.openIoCtx(POOL);
  // The VM's history for prune: this week, 1, 2 and 3 weeks back, a year back, an unfinished one.
  sets.now = await makeSet('now', { ...VM, createdAt: t0, disks: 2 });
  sets.w1 = await makeSet('w1', { ...VM, createdAt: t0 - 7 * DAY, quiesced: false });
  sets.w2 = await makeSet('w2', { ...VM, createdAt: t0 - 14 * DAY });
  sets.w3 = await makeSet('w3', { ...VM, createdAt: t0 - 21 * DAY });
  sets.y1 = await makeSet('y1', { ...VM, createdAt: t0 - 400 * DAY });
  // Outside every tier, but a restored disk hangs off it: prune must leave it and say why.
  sets.y2 = await makeSet('y2', { ...VM, createdAt: t0 - 450 * DAY });
  await cloneImage(io, sets.y2[0]!, 'snap', io, `${id}-y2-restored`);
  made.unshift(`${id}-y2-restored`);
  sets.unfinished = await makeSet('unfinished', { ...VM, createdAt: t0 - 500 * DAY, state: 'flattening' });
  // Under the VM's name but not vmsnap's to touch from here.
  sets.legacy = await makeSet('legacy', { domain: VM.domain, createdAt: t0 - 600 * DAY });
  sets.otherNs = await makeSet('other-ns', { ...VM, namespace: 'another-namespace', createdAt: t0 - 600 * DAY });
  // Another VM's set, and sets delete must refuse: in use by a clone, or by someone's snapshot.
  sets.other = await makeSet('other', { ...OTHER_VM, createdAt: t0 - 30 * DAY });
  sets.cloned = await makeSet('cloned', { ...OTHER_VM, createdAt: t0 - 40 * DAY });
  await cloneImage(io, sets.cloned[0]!, 'snap', io, `${id}-restored`);
  made.unshift(`${id}-restored`);
  sets.snapped = await makeSet('snapped', { ...OTHER_VM, createdAt: t0 - 50 * DAY });
  const img = await openImage(io, sets.snapped[0]!);
  await img.createSnap('operator-kept').finally(() => img.close());
  sets.doomed = await makeSet('doomed', { ...OTHER_VM, createdAt: t0 - 60 * DAY, disks: 2 });
}, 120_000);

afterAll(async () => {
  await client?.workflow.getHandle(`${id}-unfinished`).terminate('test over').catch(() => undefined);
  await connection?.close();
  for (const name of made) await ceph.removeImage(POOL, name).catch(() => undefined);
  await io?.close();
  await cluster?.shutdown();
});

/** `rbd ls -l` fails when an image of the shared pool goes away while it opens it: once more then. */
async function lsLong(): Promise<string> {
  for (let i = 0; ; i++) {
    try {
      return await ceph.rbd('ls', '-l', '--format', 'json', POOL);
    } catch (err) {
      if (i === 4) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** Every image made here, with its snapshots (`rbd ls -l`: one call): what a refusal must leave as it was. */
async function state(): Promise<Record<string, string[]>> {
  const rows = JSON.parse(await lsLong()) as { image: string; snapshot?: string; protected?: string }[];
  const out: Record<string, string[]> = Object.fromEntries(made.map((n) => [n, ['GONE']]));
  for (const r of rows) {
    if (!(r.image in out)) continue;
    if (out[r.image]![0] === 'GONE') out[r.image] = [];
    if (r.snapshot) out[r.image]!.push(`${r.snapshot}${r.protected === 'true' ? ' (protected)' : ''}`);
  }
  for (const snaps of Object.values(out)) snaps.sort();
  return out;
}

describe('vmsnap list without a domain: every VM, filtered', () => {
  it('lists every VM’s sets, and filters by domain, quiesced, since and schedule', async () => {
    const all = doc<{ pool: string; sets: { workflowId: string; domain: string; quiesced: boolean }[] }>(await cli('list', '--json'));
    const ours = all.sets.filter((s) => s.workflowId.startsWith(id));
    expect(new Set(ours.map((s) => s.domain))).toEqual(new Set([VM.domain, OTHER_VM.domain]));

    const [byDomain, crash, recent, since, human] = await Promise.all([
      cli('list', '--domain', OTHER_VM.domain, '--json'),
      cli('list', '--domain', VM.domain, '--quiesced', 'false', '--json'),
      cli('list', '--domain', VM.domain, '--since', '8d', '--json'),
      cli('list', '--domain', VM.domain, '--since', iso(t0 - 15 * DAY).slice(0, 10), '--json'),
      cli('list', '--domain', VM.domain, '--domain', OTHER_VM.domain),
    ]);
    const runs = (r: CliRun) => doc<{ sets: { workflowId: string }[] }>(r).sets.map((s) => s.workflowId.slice(id.length + 1));
    expect(runs(byDomain)).toEqual(['other', 'cloned', 'snapped', 'doomed']);
    expect(runs(crash)).toEqual(['w1']);
    expect(runs(recent)).toEqual(['now', 'w1']);
    // Since a UTC date: midnight of that day, so two weeks and a bit back covers now, w1, w2.
    expect(runs(since)).toEqual(['now', 'w1', 'w2']);
    // Grouped by VM: a line with the VM, then its sets (no restore record here, so no UUID shown).
    for (const vm of [VM.domain, OTHER_VM.domain]) expect(human.stdout).toMatch(new RegExp(`^${vm}\\n {2}\\S+Z  ${id}-`, 'm'));
  });

  it('with a domain, the document it always had: { domain, pool, sets }; Temporal is not needed', async () => {
    const r = doc<{ domain: string; pool: string; sets: unknown[] }>(await vmsnapCli(['list', OTHER_VM.domain, '--json'], { ...env, VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1' }));
    expect(r).toMatchObject({ domain: OTHER_VM.domain, pool: POOL });
    expect(r.sets).toHaveLength(4);
  });

  it.concurrent.each([
    [['list', '--since', 'yesterday'], /--since expects a duration/],
    [['list', '--quiesced', 'maybe'], /--quiesced must be one of true, false/],
    [['list', 'vm-1', '--domain', 'vm-2'], /not both/],
    [['list', '--domain', 'a b'], /invalid domain/],
  ])('%j → exit 2, before Ceph is asked', async (argv, message) => {
    const r = await vmsnapCli([...argv, '--json'], { ...env, VMSNAP_CEPH_CONF: '/nonexistent/ceph.conf' });
    expect(r.code, r.stderr).toBe(2);
    expect(doc<{ error: { message: string } }>(r).error.message).toMatch(message);
  });
});

describe('vmsnap delete: one set, only vmsnap’s, whole or not at all', () => {
  // Refusals change nothing, so they can share the pool at once.
  it.concurrent.each([
    ['a run with no set', 'nope', OTHER_VM.domain, 'SetNotFound'],
    ['another VM’s set', 'w2', OTHER_VM.domain, 'NotOwned'],
    ['a set with no VM UUID recorded', 'legacy', VM.domain, 'NotOwned'],
    ['a set another Temporal namespace made', 'other-ns', VM.domain, 'NotOwned'],
    ['an unfinished set', 'unfinished', VM.domain, 'SetIncomplete'],
    ['a set a clone hangs off (a restored disk)', 'cloned', OTHER_VM.domain, 'SetInUse'],
    ['a set with a snapshot vmsnap did not make', 'snapped', OTHER_VM.domain, 'SetInUse'],
  ])('refuses %s: exit 2, its type, nothing removed', async (_what, run, domain, type) => {
    const before = await state();
    const r = await cli('delete', domain, '--run', `${id}-${run}`, '--json');
    expect(r.code, r.stderr).toBe(2);
    expect(doc(r), r.stdout).toEqual({ error: { type, message: expect.any(String), exitCode: 2 } });
    expect(await state()).toEqual(before);
  });

  it.concurrent.each([
    [['delete', 'vm-1'], /--run RUN is required/],
    [['delete', 'vm 1', '--run', 'x'], /invalid domain/],
    [['delete', 'vm-1', '--run', '../x'], /invalid --run/],
    [['delete', 'vm-1', '--run', 'x', '--keep-last', '1'], /Unknown option '--keep-last'/],
  ])('%j → exit 2 before anything is contacted', async (argv, message) => {
    const r = await vmsnapCli([...argv, '--json'], { ...env, VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1', VMSNAP_CEPH_CONF: '/nonexistent/ceph.conf' });
    expect(r.code, r.stderr).toBe(2);
    expect(doc<{ error: { message: string } }>(r).error.message).toMatch(message);
  });

  it('--dry-run says what it would remove and removes nothing; then it removes the set, snapshots and all', async () => {
    const before = await state();
    const dry = await cli('delete', OTHER_VM.domain, '--run', `${id}-doomed`, '--dry-run', '--json');
    expect(dry.code, dry.stderr).toBe(0);
    expect(doc(dry)).toMatchObject({ dryRun: true, domainUuid: OTHER_VM.uuid, images: sets.doomed, removed: [] });
    expect(await state()).toEqual(before);

    // By UUID this time: the same VM.
    const r = await cli('delete', OTHER_VM.uuid, '--run', `${id}-doomed`, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(doc(r)).toMatchObject({ dryRun: false, removed: sets.doomed, left: [] });
    const after = await state();
    for (const name of sets.doomed!) expect(after[name]).toEqual(['GONE']);
    for (const [name, snaps] of Object.entries(after)) if (!sets.doomed!.includes(name)) expect(snaps, name).toEqual(before[name]);

    const again = await cli('delete', OTHER_VM.domain, '--run', `${id}-doomed`, '--json');
    expect([again.code, doc<{ error: { type: string } }>(again).error.type]).toEqual([2, 'SetNotFound']);
  });
});

describe('vmsnap prune: retention on demand', () => {
  const policy = ['--keep-last', '1', '--keep-weekly', '3', '--keep-monthly', '1'];
  type Plan = { sets: { workflowId: string; action: string; reasons: string[] }[]; removed: string[]; ignoredSets: number; dryRun: boolean };
  const byRun = (p: Plan) => Object.fromEntries(p.sets.map((s) => [s.workflowId.slice(id.length + 1), s.reasons]));

  it('--dry-run prints each set with why it is kept, or that it goes, and removes nothing', async () => {
    const before = await state();
    const r = await cli('prune', VM.domain, ...policy, '--dry-run', '--json');
    expect(r.code, r.stderr).toBe(0);
    const plan = doc<Plan>(r);
    expect(byRun(plan), r.stdout).toEqual({
      now: ['last', 'weekly', 'monthly', 'newest'],
      w1: ['weekly'],
      w2: ['weekly'],
      w3: [],
      y1: [],
      y2: [],
      unfinished: ['incomplete'],
    });
    expect(plan).toMatchObject({ dryRun: true, removed: [], ignoredSets: 2 }); // legacy, other-ns
    expect(await state()).toEqual(before);

    const human = await cli('prune', VM.domain, ...policy, '--dry-run');
    expect(human.stdout).toMatch(new RegExp(`${id}-now .*keep +last, weekly, monthly, newest`));
    expect(human.stdout).toMatch(new RegExp(`${id}-w3 .*remove`));
    expect(human.stdout).toMatch(/dry run: would remove 3 set\(s\) \(3 image\(s\)\); nothing removed/);
  });

  it('removes exactly the sets no tier keeps, skips one in use (exit 0), and nothing under the name that is not vmsnap’s here', async () => {
    const before = await state();
    const r = await cli('prune', VM.domain, ...policy, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(doc<Plan>(r).removed.sort()).toEqual([...sets.w3!, ...sets.y1!].sort());
    expect(doc<{ skipped: unknown[] }>(r).skipped).toEqual([{ image: sets.y2![0], reason: 'has clones (in use)' }]);
    const after = await state();
    for (const [name, snaps] of Object.entries(after)) {
      expect(snaps, name).toEqual([...sets.w3!, ...sets.y1!].includes(name) ? ['GONE'] : before[name]);
    }
  });

  it('refuses a name two VMs carried, and takes either by its UUID', async () => {
    const twin = { domain: OTHER_VM.domain, uuid: randomUUID() };
    await makeSet('twin', { ...twin, createdAt: t0 - 70 * DAY });
    const [amb, one] = await Promise.all([cli('prune', OTHER_VM.domain, '--keep-last', '1', '--json'), cli('prune', twin.uuid, '--keep-last', '1', '--dry-run', '--json')]);
    expect([amb.code, doc<{ error: { type: string } }>(amb).error.type]).toEqual([2, 'AmbiguousDomain']);
    expect(one.code, one.stderr).toBe(0);
    expect(Object.keys(byRun(doc<Plan>(one)))).toEqual(['twin']);
  });

  it.concurrent.each([
    [['prune', 'vm-1'], /needs a policy/],
    [['prune', 'vm-1', '--keep-weekly', '0'], /--keep-weekly expects a positive integer/],
    [['prune', 'vm-1', '--keep-monthly', '1201'], /--keep-monthly must be <= 1200/],
    [['prune', 'vm-1', '--keep-last', '1', '--schedule', 'a/b'], /invalid --schedule/],
  ])('%j → exit 2 before anything is contacted', async (argv, message) => {
    const r = await vmsnapCli([...argv, '--json'], { ...env, VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1', VMSNAP_CEPH_CONF: '/nonexistent/ceph.conf' });
    expect(r.code, r.stderr).toBe(2);
    expect(doc<{ error: { message: string } }>(r).error.message).toMatch(message);
  });
});

describe('exit codes of the image set commands', () => {
  it('a pool the cephx key has no caps on: 6 (PermissionDenied), for list, delete and prune', async () => {
    const other = need(vars, 'VMSNAP_OTHER_POOL');
    const runs = await Promise.all([
      cli('list', '--pool', other, '--json'),
      cli('delete', VM.domain, '--run', `${id}-now`, '--pool', other, '--json'),
      cli('prune', VM.domain, '--keep-last', '1', '--pool', other, '--json'),
    ]);
    for (const r of runs) {
      expect(r.code, r.stderr).toBe(6);
      expect(doc(r)).toEqual({ error: { type: 'PermissionDenied', message: expect.stringMatching(/Ceph refused client\.\S+: .*EPERM/), exitCode: 6 } });
    }
  });

  it('Temporal or Ceph unreachable: 4 (Unreachable)', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-life-'));
    const conf = path.join(dir, 'ceph.conf');
    // The lab's conf with a monitor address nothing listens on.
    writeFileSync(conf, readFileSync(need(vars, 'CEPH_CONF'), 'utf8').replace(/^\s*mon[_ ]host\s*=.*$/m, 'mon_host = v2:127.0.0.1:1'));
    const [temporal, cephDown] = await Promise.all([
      vmsnapCli(['delete', VM.domain, '--run', `${id}-now`, '--json'], { ...env, VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1' }),
      vmsnapCli(['list', '--json'], { ...env, VMSNAP_CEPH_CONF: conf }),
    ]);
    expect(temporal.code, temporal.stderr).toBe(4);
    expect(doc(temporal)).toEqual({ error: { type: 'Unreachable', message: expect.stringMatching(/cannot reach Temporal at 127\.0\.0\.1:1/), exitCode: 4 } });
    expect(cephDown.code, cephDown.stderr).toBe(4);
    expect(doc(cephDown)).toEqual({ error: { type: 'Unreachable', message: expect.stringMatching(/cannot connect to Ceph/), exitCode: 4 } });
  });
});
