import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { startHarness, uniqueId } from '../helpers/harness';
import { decodeVerification } from '../../src/model/verification';
import type { Verification } from '../../src/model/verification';
import type { Harness } from '../helpers/harness';
import { need } from '../../support/lab/env';

/*
 * `vmsnap schedule` end to end: the real CLI as a child process, a real host worker for the
 * schedule's task queue, real Temporal Schedules, real images in the lab's image pool.
 */

const POOL = 'images';
let h: Harness;
let ceph: CephView;
let env: NodeJS.ProcessEnv;
let domain: string;
const scheduleId = uniqueId('cli-sched');
const otherSchedule = uniqueId('cli-other');
/** Not this schedule's: vmsnap-owned with another schedule's label, and a plain image. */
const bystanders = [uniqueId('bystander-owned'), uniqueId('bystander-plain')];

const cli = (...argv: string[]) => vmsnapCli(['schedule', ...argv], env);
/** Flags that would reach nothing: any exit other than 2 means something was contacted. */
const offline = (...argv: string[]) => vmsnapCli(['schedule', ...argv, '--temporal-address', '127.0.0.1:1'], env);

beforeAll(async () => {
  h = await startHarness({ host: uniqueId('sched') });
  ceph = new CephView(h.vars);
  env = cliEnv(h.vars);
  domain = need(h.vars, 'VMSNAP_GUEST_1DISK');
  await ceph.rbd('create', '--size', '8M', `${POOL}/${bystanders[0]}`);
  for (const [k, v] of Object.entries({
    'vmsnap.owner': 'vmsnap',
    'vmsnap.image': `${POOL}/${bystanders[0]}`,
    'vmsnap.domain': domain,
    'vmsnap.state': 'complete',
    'vmsnap.created-at': '2020-01-01T00:00:00.000Z',
    'vmsnap.workflow-id': 'someone-else',
    'vmsnap.label.schedule': otherSchedule,
  })) {
    await ceph.rbd('image-meta', 'set', `${POOL}/${bystanders[0]}`, k, v);
  }
  await ceph.rbd('create', '--size', '8M', `${POOL}/${bystanders[1]}`);
});

afterAll(async () => {
  await vmsnapCli(['schedule', 'delete', scheduleId], env).catch(() => undefined);
  if (ceph) {
    for (const img of await scheduleImages(scheduleId).catch(() => [])) await ceph.removeImage(POOL, img);
    for (const img of bystanders) await ceph.removeImage(POOL, img);
  }
  await h?.stop();
});

/** Runs that lost to another test on the shared guest (per-VM lock, a lock-holding fault test). */
let retriedRuns = 0;
const CONTENTION = ['DomainBusy', 'SnapshotTimeout'];

/** `trigger --wait`, once more when the shared lab guest was busy with another suite's run. */
async function triggerRun() {
  for (let attempt = 1; ; attempt++) {
    const r = await cli('trigger', scheduleId, '--wait', '--json');
    const failure = r.code === 0 ? undefined : (JSON.parse(r.stdout || '{}') as { type?: string });
    if (!failure?.type || !CONTENTION.includes(failure.type) || attempt === 4) return r;
    console.warn(`schedule run lost to lab contention (${failure.type}); triggering again`);
    retriedRuns++;
    await new Promise((res) => setTimeout(res, 3000));
  }
}

/** Images in the pool carrying this schedule's label, read with the admin key via the rbd CLI. */
async function scheduleImages(id: string): Promise<string[]> {
  const out: string[] = [];
  for (const img of await ceph.images(POOL)) {
    const meta = await ceph.meta(POOL, img).catch(() => ({}) as Record<string, string>);
    if (meta['vmsnap.label.schedule'] === id) out.push(img);
  }
  return out.sort();
}

describe('vmsnap schedule: bad input is refused before anything is contacted', () => {
  it.each([
    [['create', 's1', '--domain', 'vm-1'], /exactly one of --every .*, --cron .* or --window/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--cron', '0 3 * * *'], /exactly one of/],
    [['create', 's1', '--domain', 'vm-1', '--every', '5x'], /--every expects a duration/],
    [['create', 's1', '--domain', 'vm-1', '--every', '2s'], /--every must be at least 10s/],
    [['create', 's1', '--domain', 'vm-1', '--cron', 'at three'], /--cron expects five fields/],
    [['create', 's1', '--every', '1h'], /--domain is required/],
    [['create', 'bad id!', '--domain', 'vm-1', '--every', '1h'], /invalid schedule id/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--keep-last', '0'], /--keep-last expects a positive integer/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--keep-daily', 'week'], /--keep-daily expects a positive integer/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--overlap', 'sometimes'], /--overlap must be one of skip, buffer-one, allow-all/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--keep-weekly', '0'], /--keep-weekly expects a positive integer/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--keep-monthly', '5000'], /--keep-monthly must be <= 1200/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h30x'], /--every expects a duration/],
    [['list', '--host', 'hv-a'], /Unknown option '--host'/], // a flag that does not apply is refused, not ignored
    [['update', 's1'], /nothing to update/],
    [['update', 's1', '--keep-last', '2', '--no-retention'], /--keep-… or --no-retention, not both/],
    [['update', 's1', '--every', '5s'], /--every must be at least 10s/],
    [['update', 's1', '--every', '1h', '--window', '01:00-05:00'], /exactly one of/],
    [['update', 's1', '--domain', 'vm-2'], /Unknown option '--domain'/],
    [['update', 's1', '--pause-on-failure', '--no-pause-on-failure'], /not both/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--quiesce', 'maybe'], /quiesce/],
    [['create', 's1', '--domain', 'vm 1', '--every', '1h'], /domain/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--no-clone', '--keep-last', '2'], /retention .*clone/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--label', 'schedule=other'], /--label schedule=\.\.\. is reserved/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--verify-every', '0'], /--verify-every expects a positive integer/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--verify-check', 'pg_isready'], /--verify-check needs --verify-every/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--no-clone', '--verify-every', '2'], /verifyEvery .*snapshot-only/],
    [['create', 's1', '--domain', 'vm-1', '--every', '1h', '--timezone', 'Mars/Olympus'], /unknown --timezone/],
    [['frobnicate'], /unknown schedule subcommand "frobnicate"/],
    [['describe'], /missing <schedule-id>/],
    [['pause', 'a', 'b'], /takes one <schedule-id>/],
    [['trigger', 's1', '--overlap', 'never'], /--overlap must be one of/],
  ])('%j → exit 2', async (argv, message) => {
    const r = await offline(...argv);
    expect(r.stderr).toMatch(message);
    expect(r.code).toBe(2);
  });

  it('shows --help for every subcommand with exit 0', async () => {
    for (const sub of ['create', 'update', 'list', 'describe', 'pause', 'unpause', 'trigger', 'delete']) {
      const r = await offline(sub, '--help');
      expect(r.code, sub).toBe(0);
      expect(r.stdout, sub).toMatch(new RegExp(`^Usage: vmsnap schedule ${sub}`));
    }
    const top = await offline('--help');
    expect(top.stdout).toMatch(/create\|update\|list\|describe\|pause\|unpause\|trigger\|delete/);
  });
});

describe('vmsnap schedule against an unreachable Temporal', () => {
  // Concurrently: each waits out the CLI's 10 s connect timeout, and they share nothing.
  it.concurrent.each([[['create', 's1', '--domain', 'vm-1', '--every', '1h', '--keep-last', '2']], [['list']], [['describe', 's1']], [['trigger', 's1', '--wait']], [['update', 's1', '--keep-weekly', '2']]])(
    '%j → exit 4 with the address and a hint',
    async (argv) => {
      const r = await offline(...argv);
      expect(r.stderr).toMatch(/cannot reach Temporal at 127\.0\.0\.1:1: .*--temporal-address/);
      expect(r.code).toBe(4);
    },
  );
});

describe('vmsnap schedule on the lab', () => {
  const runs: { workflowId: string; images: string[]; ms: number; retention: SnapshotResult['retention']; verification: SnapshotResult['verification'] }[] = [];

  it('creates a schedule with retention and verify-every 2 (paused, so only triggers run it)', async () => {
    const r = await cli('create', scheduleId, '--domain', domain, '--host', h.config.host, '--every', '1h', '--keep-last', '2', '--verify-every', '2', '--paused', '--json');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(json(r)).toMatchObject({
      scheduleId,
      domain,
      host: h.config.host,
      taskQueue: h.hw.taskQueue,
      spec: 'every 1h',
      overlap: 'SKIP',
      retention: { keepLast: 2 },
      paused: true,
      input: { domain, labels: { schedule: scheduleId }, retention: { keepLast: 2 }, verifyEvery: 2 },
    });
    const again = await cli('create', scheduleId, '--domain', domain, '--host', h.config.host, '--every', '1h');
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already exists/);
  });

  it('runs 3 times, prunes down to keep-last 2 leaving unrelated images alone, and verifies runs 1 and 3 (every 2nd)', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await triggerRun();
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const result = json<SnapshotResult & { scheduleId: string }>(r);
      expect(result.workflowId).toMatch(new RegExp(`^sched-${scheduleId}-`));
      runs.push({ workflowId: result.workflowId, images: result.disks.map((d) => d.image!.split('/')[1]), ms: r.ms, retention: result.retention, verification: result.verification });
    }
    console.log(`schedule runs (trigger --wait, CLI wall time): ${runs.map((r) => `${r.ms} ms`).join(', ')}`);

    // Run 2 follows a verified set; run 3 follows run 2, unverified (run 1 pruned by then).
    expect(runs.map((r) => (r.verification && 'verdict' in r.verification ? r.verification.verdict : r.verification))).toEqual(['verified', undefined, 'verified']);
    const third = runs[2].verification as Verification;
    expect(third.workflowId).toBe(`${runs[2].workflowId}.verify`);
    expect(decodeVerification((await ceph.meta(POOL, runs[2].images[0]))['vmsnap.verify'])).toMatchObject({ verdict: 'verified', workflowId: third.workflowId });
    expect((await ceph.meta(POOL, runs[1].images[0]))['vmsnap.verify']).toBeUndefined();
    expect(runs[0].retention).toMatchObject({ pruned: [], skipped: [] });
    expect(runs[1].retention).toMatchObject({ pruned: [], skipped: [] });
    expect(runs[2].retention).toMatchObject({ pruned: runs[0].images, skipped: [] });
    expect(runs[2].retention!.kept.sort()).toEqual([...runs[1].images, ...runs[2].images].sort());

    expect(await scheduleImages(scheduleId)).toEqual([...runs[1].images, ...runs[2].images].sort());
    for (const img of runs[0].images) expect(await ceph.images(POOL)).not.toContain(img);
    // The kept images are intact: complete, with their protected snap.
    for (const img of [...runs[1].images, ...runs[2].images]) {
      expect((await ceph.meta(POOL, img))['vmsnap.state']).toBe('complete');
      expect(await ceph.snaps(POOL, img)).toEqual(['snap']);
    }
    // Bystanders untouched, metadata and all.
    const pool = await ceph.images(POOL);
    for (const b of bystanders) expect(pool).toContain(b);
    expect((await ceph.meta(POOL, bystanders[0]))['vmsnap.label.schedule']).toBe(otherSchedule);
  });

  it('describes the schedule: spec, retention, counts and its recent runs', async () => {
    const r = await cli('describe', scheduleId, '--json');
    expect(r.code).toBe(0);
    const d = json(r);
    expect(d).toMatchObject({ scheduleId, domain, spec: 'every 1h', overlap: 'SKIP', retention: { keepLast: 2 }, paused: true });
    expect(d.actionsTaken).toBe(3 + retriedRuns);
    const recent = d.recentRuns as { workflowId: string; status: string }[];
    for (const run of runs) expect(recent.find((x) => x.workflowId === run.workflowId)?.status).toBe('COMPLETED');

    const human = await cli('describe', scheduleId);
    expect(human.stdout).toMatch(new RegExp(`schedule ${scheduleId}: PAUSED`));
    expect(human.stdout).toMatch(/retention: keep-last 2/);
  });

  it('updates spec and retention in place; the next run prunes by the new tiers', async () => {
    // Run 2's set backdated a week (its images' created-at): a set of last week, for --keep-weekly.
    const lastWeek = new Date(Date.now() - 7 * 86_400_000).toISOString();
    for (const img of runs[1].images) await ceph.rbd('image-meta', 'set', `${POOL}/${img}`, 'vmsnap.created-at', lastWeek);

    const u = await cli('update', scheduleId, '--every', '2h', '--keep-last', '1', '--keep-weekly', '2', '--json');
    expect(u.code, u.stderr).toBe(0);
    expect(json(u)).toMatchObject({ scheduleId, spec: 'every 2h', retention: { keepLast: 1, keepWeekly: 2 } });
    const d = json(await cli('describe', scheduleId, '--json'));
    // In place: same schedule, same count of runs, still paused, the new spec and the run input's new retention.
    expect(d).toMatchObject({ spec: 'every 2h', retention: { keepLast: 1, keepWeekly: 2 }, paused: true, actionsTaken: 3 + retriedRuns, input: { domain, retention: { keepLast: 1, keepWeekly: 2 }, verifyEvery: 2 } });
    expect((d.recentRuns as unknown[]).length).toBe(3 + retriedRuns);
    const listed = json<{ scheduleId: string; spec: string; retention: unknown }[]>(await cli('list', '--json', '--domain', domain));
    expect(listed.find((x) => x.scheduleId === scheduleId)).toMatchObject({ spec: 'every 2h', retention: { keepLast: 1, keepWeekly: 2 } });

    const r = await triggerRun();
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const result = json<SnapshotResult>(r);
    const newest = result.disks.map((x) => x.image!.split('/')[1]);
    // keep-last 1: this run; keep-weekly 2: this run (this week) and run 2 (last week); run 3 goes.
    expect(result.retention).toMatchObject({ pruned: runs[2].images, skipped: [] });
    expect(await scheduleImages(scheduleId)).toEqual([...runs[1].images, ...newest].sort());
    runs.push({ workflowId: result.workflowId, images: newest, ms: r.ms, retention: result.retention, verification: result.verification });

    const gone = await cli('update', uniqueId('no-such-schedule'), '--keep-last', '1', '--json');
    expect(gone.code).toBe(2);
    expect(json<{ error: { type: string } }>(gone).error.type).toBe('NotFound');
  });

  it('lists it, pauses and unpauses it', async () => {
    const l = await cli('list', '--json', '--domain', domain);
    expect(l.code).toBe(0);
    expect(json<{ scheduleId: string; paused: boolean }[]>(l).find((s) => s.scheduleId === scheduleId)).toMatchObject({ paused: true });

    expect((await cli('unpause', scheduleId, '--note', 'test unpause')).code).toBe(0);
    let d = json(await cli('describe', scheduleId, '--json'));
    expect(d).toMatchObject({ paused: false, note: 'test unpause' });
    expect((d.nextRuns as string[]).length).toBeGreaterThan(0);

    const p = await cli('pause', scheduleId, '--json');
    expect(p.code).toBe(0);
    expect(json(p)).toMatchObject({ scheduleId, paused: true });
    d = json(await cli('describe', scheduleId, '--json'));
    expect(d).toMatchObject({ paused: true, note: 'paused by vmsnap CLI' });
  });

  it('deletes it, keeping its images; unknown ids are exit 2', async () => {
    const r = await cli('delete', scheduleId);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/images are kept/);
    const gone = await cli('describe', scheduleId);
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(new RegExp(`no schedule "${scheduleId}"`));
    expect((await cli('trigger', scheduleId)).code).toBe(2);
    expect(await scheduleImages(scheduleId)).toHaveLength(2);
  });
});
