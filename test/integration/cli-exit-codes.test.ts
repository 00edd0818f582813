import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { cliEnv, vmsnapCli } from '../helpers/cli';
import type { CliRun } from '../helpers/cli';
import { CephView } from '../helpers/ceph-inspect';
import { ensureThawed } from '../helpers/guest';
import { need } from '../../support/lab/env';
import { repetitions } from '../helpers/lanes';
import { grpcCutProxy } from '../helpers/grpc-cut-proxy';
import { sleep } from '../helpers/worker-process';

/*
 * `vmsnap snapshot <vm> --wait --json` the way a backup script calls it: it branches on the exit
 * code and parses stdout. The CLI used to print a successful result and then die of grpc-js
 * `Channel has been shut down` (a progress query's retry timer firing after the connection was
 * closed), exiting 1 after a success.
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
}, 600_000); // the in-process worker bundles the workflows at start: minutes on a loaded machine
afterAll(async () => {
  if (!h) return;
  await ensureThawed(h.vars, g1);
  await h.stop();
});

/** stdout holds exactly one JSON document (and nothing else but whitespace); returns it. */
function oneJsonDocument(r: CliRun): Record<string, unknown> {
  const text = r.stdout.trim();
  const doc = JSON.parse(text) as Record<string, unknown>; // throws on a second document or trailing text
  expect(typeof doc).toBe('object');
  return doc;
}

/** A snapshot-only run leaves its RBD snapshot and two metadata keys on the source image. */
async function removeSnapshots(result: SnapshotResult): Promise<void> {
  for (const d of result.disks) {
    const [spec, snap] = d.snapshot.split('@') as [string, string];
    await ceph.rbd('snap', 'rm', `${spec}@${snap}`).catch(() => undefined);
    await ceph.rbd('image-meta', 'remove', spec, `vmsnap.done.${snap}`).catch(() => undefined);
    await ceph.rbd('image-meta', 'remove', spec, `vmsnap.snap-owner.${snap}`).catch(() => undefined);
  }
}

describe('vmsnap snapshot --wait --json: exit code and stdout a script can trust', () => {
  // A race repeated (the exit 1 after a success): 5 runs in the default lane, 20 in the extended one.
  const runs = repetitions(undefined, 5, 20);
  it(`${runs} runs in a row: each exits 0 with exactly one parseable JSON document on stdout`, async () => {
    const bad: string[] = [];
    for (let i = 0; i < runs; i++) {
      const id = uniqueId(`cli-exit-${i}`);
      const r = await vmsnapCli(['snapshot', g1, '--host', h.config.host, '--quiesce', 'require', '--no-clone', '--workflow-id', id, '--wait', '--json'], env);
      let result: SnapshotResult | undefined;
      try {
        result = oneJsonDocument(r) as unknown as SnapshotResult;
      } catch (err) {
        bad.push(`run ${i}: stdout is not one JSON document (${(err as Error).message}): ${r.stdout.slice(0, 300)}`);
      }
      if (r.code !== 0) bad.push(`run ${i}: exit ${r.code} after ${result ? 'printing a result' : 'no result'}; stderr: ${r.stderr.slice(-600)}`);
      else if (r.stderr.includes('Channel has been shut down')) bad.push(`run ${i}: exit 0 but stderr: ${r.stderr.slice(-600)}`);
      // One line per run, so a slow lab shows how far it got.
      console.log(`cli-exit run ${i}: exit ${r.code}, ${(r.ms / 1000).toFixed(1)} s${bad.length ? `, ${bad.length} bad so far` : ''}`);
      if (result?.disks) {
        expect(result.quiesced, `run ${i}`).toBe(true);
        await removeSnapshots(result);
      }
    }
    expect(bad).toEqual([]);
  }, 1_800_000);

  it('a failed run exits 1 with one JSON document naming the failure (quiesce require, no agent)', async () => {
    const noagent = need(h.vars, 'VMSNAP_GUEST_NOAGENT');
    const r = await vmsnapCli(['snapshot', noagent, '--host', h.config.host, '--quiesce', 'require', '--no-clone', '--workflow-id', uniqueId('cli-exit-fail'), '--wait', '--json'], env);
    expect(r.code, r.stderr).toBe(1);
    expect(oneJsonDocument(r)).toMatchObject({ status: 'failed', type: 'QuiesceUnavailable' });
    expect(r.stderr).not.toContain('Channel has been shut down');
  });

  it('a domain that does not exist exits 2 (bad input) with one JSON document', async () => {
    const r = await vmsnapCli(['snapshot', 'vmsnap-no-such-domain', '--host', h.config.host, '--workflow-id', uniqueId('cli-exit-nodom'), '--wait', '--json'], env);
    expect(r.code, r.stderr).toBe(2);
    expect(oneJsonDocument(r)).toMatchObject({ status: 'failed', type: 'DomainNotFound' });
  });
});

/** A run on a queue no worker polls: it waits there until it times out or is ended. */
const nowhere = () => `vmsnap-${uniqueId('nowhere')}`;

async function statusOf(id: string): Promise<string | undefined> {
  return h.client.workflow
    .getHandle(id)
    .describe()
    .then((d) => d.status.name, () => undefined);
}

describe('exit codes of status, cancel and snapshot --wait, with --json', () => {
  it('status of a run that timed out exits 5', async () => {
    const id = uniqueId('cli-timeout');
    await h.client.workflow.start('consistentSnapshot', { taskQueue: nowhere(), workflowId: id, args: [{ domain: g1 }], workflowExecutionTimeout: '1s' });
    for (let i = 0; i < 60 && (await statusOf(id)) !== 'TIMED_OUT'; i++) await sleep(500);
    const r = await vmsnapCli(['status', id, '--json'], env);
    expect(oneJsonDocument(r)).toMatchObject({ workflowId: id, status: 'TIMED_OUT' });
    expect(r.code, r.stderr).toBe(5);
  });

  it('snapshot --wait of a run that gets terminated exits 5, and so does status', async () => {
    const id = uniqueId('cli-term');
    const waiting = vmsnapCli(['snapshot', g1, '--host', nowhere().slice('vmsnap-'.length), '--workflow-id', id, '--wait', '--json'], env);
    for (let i = 0; i < 120 && (await statusOf(id)) !== 'RUNNING'; i++) await sleep(250);
    await h.client.workflow.getHandle(id).terminate('cli exit code test');
    const r = await waiting;
    expect(oneJsonDocument(r)).toMatchObject({ workflowId: id, status: 'failed', type: 'Terminated' });
    expect(r.code, r.stderr).toBe(5);
    const s = await vmsnapCli(['status', id, '--json'], env);
    expect([s.code, oneJsonDocument(s).status]).toEqual([5, 'TERMINATED']);
  });

  it('status and cancel of a run that does not exist exit 2 (NotFound), as one JSON error document', async () => {
    const id = uniqueId('cli-nosuch');
    for (const cmd of ['status', 'cancel']) {
      const r = await vmsnapCli([cmd, id, '--json'], env);
      expect(r.code, r.stderr).toBe(2);
      expect(oneJsonDocument(r)).toEqual({ error: { type: 'NotFound', message: expect.stringContaining(id), exitCode: 2 }, });
    }
  });

  it('status and cancel against a server that goes away after the connection exit 4, not 2', async () => {
    const id = uniqueId('cli-gone');
    await h.client.workflow.start('consistentSnapshot', { taskQueue: nowhere(), workflowId: id, args: [{ domain: g1 }] });
    try {
      const [host, port] = need(h.vars, 'TEMPORAL_ADDRESS').split(':') as [string, string];
      // Concurrently: each waits out the client's retries of UNAVAILABLE (about 20 s).
      const runs = await Promise.all(
        ['status', 'cancel'].map(async (cmd) => {
          // The connection's check is the first call; the command's own is the second.
          const proxy = await grpcCutProxy({ host, port: Number(port) }, 1);
          try {
            const r = await vmsnapCli([cmd, id, '--json'], { ...env, VMSNAP_TEMPORAL_ADDRESS: proxy.address });
            await proxy.cut;
            return { cmd, r };
          } finally {
            proxy.close();
          }
        }),
      );
      for (const { cmd, r } of runs) {
        expect(r.code, `${cmd}: ${r.stderr}`).toBe(4);
        expect(oneJsonDocument(r)).toEqual({ error: { type: 'Unreachable', message: expect.stringMatching(new RegExp(`^cannot (describe|cancel) ${id}: `)), exitCode: 4 } });
      }
      expect(await statusOf(id)).toBe('RUNNING'); // the cancel never reached the server
    } finally {
      await h.client.workflow.getHandle(id).terminate('test over').catch(() => undefined);
    }
  });

  it('a server that is not there at all: 4, as one JSON error document', async () => {
    const r = await vmsnapCli(['status', 'whatever', '--json'], { ...env, VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(r.code, r.stderr).toBe(4);
    expect(oneJsonDocument(r)).toEqual({ error: { type: 'Unreachable', message: expect.stringMatching(/^cannot reach Temporal at 127\.0\.0\.1:1/), exitCode: 4 } });
  });
});
