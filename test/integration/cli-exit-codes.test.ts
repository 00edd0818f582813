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
