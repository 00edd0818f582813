import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@temporalio/client';
import { runKeyFor, sourceSnapName } from '../../src/model/naming';
import { OrphanReaper } from '../../src/worker/orphan-reaper';
import { resolveScope } from '../../src/worker/scope';
import { CephView } from '../helpers/ceph-inspect';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { need } from '../../support/lab/env';

/*
 * Two Temporal namespaces share one Ceph pool. A run of the other namespace is in flight (its
 * workflow id is unknown here, so it looks "not found" to this namespace); this namespace's
 * orphan reaper must leave its unfinished image, its snapshot and its owner record alone — and
 * still reap the same kind of leftovers of its own namespace's ended run.
 */

const run = promisify(execFile);
const id = uniqueId('scope');
const OTHER_NS = `vmsnap-other-${id.slice(-8)}`;
let h: Harness;
let ceph: CephView;
let other: Client;

beforeAll(async () => {
  h = await startHarness();
  ceph = new CephView(h.vars);
  await run(need(h.vars, 'TEMPORAL_BIN'), ['operator', 'namespace', 'create', '--namespace', OTHER_NS, '--address', need(h.vars, 'TEMPORAL_ADDRESS')]);
  other = new Client({ connection: h.client.connection, namespace: OTHER_NS });
  // A fresh namespace takes a moment to be served.
  for (let t0 = Date.now(); ; ) {
    try {
      await other.workflowService.describeNamespace({ namespace: OTHER_NS });
      break;
    } catch (err) {
      if (Date.now() - t0 > 30_000) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}, 120_000);

afterAll(async () => {
  await h?.stop();
});

describe('orphan reaper scope', () => {
  it("leaves another namespace's in-flight run alone, reaps its own namespace's ended run", async () => {
    const G1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
    const source = `${G1}-vdb`;
    const ourScope = h.hw.deps.scope;
    const otherScope = await resolveScope({ ...h.config, temporal: { ...h.config.temporal, namespace: OTHER_NS } }, other);
    expect(otherScope.cluster).not.toBe(ourScope.cluster);

    // The other namespace's run, in flight: started on a task queue nobody polls, so it stays RUNNING.
    const inFlight = await other.workflow.start('consistentSnapshot', { taskQueue: `nobody-${id}`, workflowId: `${id}-theirs`, args: [{ domain: G1 }] });
    const ended = `${id}-ours-ended`; // never started here: NOT_FOUND, exactly like the other namespace's id
    const made: { wf: string; scope: typeof ourScope; image: string; snap: string }[] = [];
    try {
      for (const [wf, scope] of [[inFlight.workflowId, otherScope], [ended, ourScope]] as const) {
        const image = `${wf}-vdb`;
        const snap = sourceSnapName(runKeyFor(wf));
        made.push({ wf, scope, image, snap });
        // An unfinished clone of the run in the image pool.
        await ceph.rbd('create', '--size', '4M', `images/${image}`);
        for (const [k, v] of Object.entries({
          'vmsnap.owner': 'vmsnap', 'vmsnap.image': `images/${image}`, 'vmsnap.workflow-id': wf, 'vmsnap.state': 'cloned',
          'vmsnap.temporal-namespace': scope.namespace, 'vmsnap.cluster': scope.cluster,
        })) await ceph.rbd('image-meta', 'set', `images/${image}`, k, v);
        // Its temporary snapshot on the live source disk, with an owner record past any horizon.
        await ceph.rbd('snap', 'create', `vms/${source}@${snap}`);
        const record = { workflowId: wf, ...scope, recordedAt: '2020-01-01T00:00:00.000Z', state: 'pending' };
        await run('rados', ['-c', need(h.vars, 'CEPH_CONF'), '--keyring', need(h.vars, 'CEPH_KEYRING'), '-p', 'vms', 'setomapval', 'vmsnap.snap-owners', `${source}@${snap}`, JSON.stringify(record)]);
      }

      const reaper = new OrphanReaper(h.hw.deps, h.client, 'images', h.hw.deps.log, 60_000, 3600_000);
      await reaper.sweep();

      const [theirs, ours] = made;
      const images = await ceph.images('images');
      const snaps = await ceph.vmsnapSnaps('vms', source);
      const records = await ceph.ownerRecordKeys('vms');
      // The other namespace's in-flight run: untouched.
      expect(images).toContain(theirs!.image);
      expect(snaps).toContain(theirs!.snap);
      expect(records).toContain(`${source}@${theirs!.snap}`);
      expect((await inFlight.describe()).status.name).toBe('RUNNING');
      // This namespace's ended run: reaped, record and all.
      expect(images).not.toContain(ours!.image);
      expect(snaps).not.toContain(ours!.snap);
      expect(records).not.toContain(`${source}@${ours!.snap}`);
    } finally {
      await inFlight.terminate('test done').catch(() => undefined);
      for (const m of made) {
        await ceph.removeImage('images', m.image);
        await ceph.rbd('snap', 'rm', `vms/${source}@${m.snap}`).catch(() => undefined);
        await ceph.dropOwnerRecord('vms', `${source}@${m.snap}`);
      }
    }
  });
});
