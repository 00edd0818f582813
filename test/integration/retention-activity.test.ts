import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyRetention } from '../../activities/retention';
import { loadConfig } from '../../src/config';
import { createHostDeps } from '../../src/worker/host-deps';
import type { HostDeps } from '../../src/worker/host-deps';
import { CephView } from '../helpers/ceph-inspect';
import { uniqueId } from '../helpers/harness';
import { labVars, need } from '../../support/lab/env';

/*
 * The retention activity against the lab's Ceph with the restricted client.vmsnap key: it prunes
 * exactly the schedule's complete, unused images of the domain, and nothing else — not another
 * schedule's, not another domain's, not an image someone else owns, not one in use.
 */

const POOL = 'images';
const id = uniqueId('ret');
const schedule = `sched-${id}`;
const domain = `dom-${id}`;
const OLD = '2020-01-01T00:00:00.000Z';
const name = (n: string) => `${id}-${n}`;

let ceph: CephView;
let deps: HostDeps;
const created: string[] = [];

async function image(n: string, meta: Record<string, string>, opts: { protectedSnap?: boolean; extraSnap?: string } = {}) {
  const spec = `${POOL}/${name(n)}`;
  await ceph.rbd('create', '--size', '4M', spec);
  created.unshift(name(n));
  for (const [k, v] of Object.entries(meta)) await ceph.rbd('image-meta', 'set', spec, k, v === SELF ? spec : v);
  if (opts.protectedSnap ?? meta['vmsnap.state'] === 'complete') {
    await ceph.rbd('snap', 'create', `${spec}@snap`);
    await ceph.rbd('snap', 'protect', `${spec}@snap`);
  }
  if (opts.extraSnap) await ceph.rbd('snap', 'create', `${spec}@${opts.extraSnap}`);
}

/** Placeholder for the image's own pool/name in vmsnap.image. */
const SELF = '<self>';
// The VM the schedule snapshots, and an earlier VM of the same name (deleted, then recreated:
// libvirt gave the new one another UUID). Simulated by the recorded UUID, not a second domain.
const UUID = '0b6d7c1e-1111-4000-8000-000000000001';
const OLD_VM_UUID = '0b6d7c1e-2222-4000-8000-000000000002';
const SCOPE = { namespace: 'default', cluster: `fleet-${id}` };
const ours = (run: string, createdAt: string, state = 'complete') => ({
  'vmsnap.owner': 'vmsnap',
  'vmsnap.image': SELF,
  'vmsnap.domain': domain,
  'vmsnap.domain-uuid': UUID,
  'vmsnap.temporal-namespace': SCOPE.namespace,
  'vmsnap.cluster': SCOPE.cluster,
  'vmsnap.label.schedule': schedule,
  'vmsnap.workflow-id': run,
  'vmsnap.created-at': createdAt,
  'vmsnap.state': state,
});

beforeAll(async () => {
  const vars = labVars();
  ceph = new CephView(vars);
  const config = loadConfig(
    {
      ceph: { conf: need(vars, 'CEPH_CONF'), id: vars.CEPH_VMSNAP_ID ?? 'admin', keyring: vars.CEPH_VMSNAP_KEYRING ?? vars.CEPH_KEYRING },
      libvirt: { uri: need(vars, 'LIBVIRT_DEFAULT_URI') },
      stateDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-ret-')),
      metricsPort: 0,
    },
    {},
    undefined,
  );
  deps = createHostDeps(config, undefined, undefined, SCOPE);

  const now = new Date().toISOString();
  await image('old1', ours('r1', '2020-01-01T00:00:00.000Z'));
  await image('old2', ours('r2', '2020-01-02T00:00:00.000Z'));
  await image('new', ours('r3', now));
  await image('half', ours('r4', OLD, 'cloned'), { protectedSnap: false });
  await image('parent', ours('r5', OLD));
  await ceph.rbd('clone', `${POOL}/${name('parent')}@snap`, `${POOL}/${name('child')}`);
  created.unshift(name('child'));
  await image('extra-snap', ours('r6', OLD), { extraSnap: 'operator-kept' });
  await image('other-schedule', { ...ours('r7', OLD), 'vmsnap.label.schedule': 'another-schedule' });
  await image('other-domain', { ...ours('r8', OLD), 'vmsnap.domain': 'another-domain' });
  await image('not-ours', { ...ours('r9', OLD), 'vmsnap.owner': 'someone-else' });
  await image('plain', {});
  // The earlier same-name VM's images: older than everything, complete, same schedule label.
  await image('prev-vm-1', { ...ours('r10', '2019-01-01T00:00:00.000Z'), 'vmsnap.domain-uuid': OLD_VM_UUID });
  await image('prev-vm-2', { ...ours('r11', '2019-01-02T00:00:00.000Z'), 'vmsnap.domain-uuid': OLD_VM_UUID });
  // Same VM, but made by another Temporal namespace, or another fleet, sharing the pool.
  await image('other-namespace', { ...ours('r12', OLD), 'vmsnap.temporal-namespace': 'other-ns' });
  await image('other-fleet', { ...ours('r13', OLD), 'vmsnap.cluster': 'another-fleet' });
  // Made before UUIDs were recorded: no proof it is this VM's.
  const { 'vmsnap.domain-uuid': _u, 'vmsnap.temporal-namespace': _n, 'vmsnap.cluster': _c, ...legacy } = ours('r14', OLD);
  await image('legacy', legacy);
  // A VM disk restored from one of our images and flattened: rbd clone copied every vmsnap.* key.
  await ceph.rbd('clone', `${POOL}/${name('new')}@snap`, `${POOL}/${name('restored')}`);
  created.unshift(name('restored'));
  await ceph.rbd('flatten', '--no-progress', `${POOL}/${name('restored')}`);
}, 400_000);

afterAll(async () => {
  for (const img of created) await ceph.removeImage(POOL, img); // child before its parent
  await deps?.close();
});

describe('applyRetention', () => {
  it('prunes only this schedule’s complete, unused images of the domain', async () => {
    const r = await applyRetention(deps)({ pool: POOL, scheduleId: schedule, domain, domainUuid: UUID, policy: { keepLast: 1 }, keepImages: [name('new')] });

    expect(r.pruned.sort()).toEqual([name('old1'), name('old2')].sort());
    expect(r.kept.sort()).toEqual([name('half'), name('new')].sort());
    expect(r.skipped).toEqual(
      expect.arrayContaining([
        { image: name('parent'), reason: 'has clones (in use)' },
        { image: name('extra-snap'), reason: 'has snapshots vmsnap did not make: operator-kept' },
      ]),
    );
    expect(r.skipped).toHaveLength(2);

    const left = await ceph.images(POOL);
    for (const gone of ['old1', 'old2']) expect(left).not.toContain(name(gone));
    expect((await ceph.meta(POOL, name('restored')))['vmsnap.label.schedule']).toBe(schedule);
    for (const kept of ['new', 'half', 'parent', 'child', 'restored', 'extra-snap', 'other-schedule', 'other-domain', 'not-ours', 'plain',
      'prev-vm-1', 'prev-vm-2', 'other-namespace', 'other-fleet', 'legacy']) {
      expect(left, kept).toContain(name(kept));
    }
    // The ones it left alone are unchanged: their snapshots are still there and protected.
    expect(await ceph.snaps(POOL, name('parent'))).toEqual(['snap']);
    expect(await ceph.snaps(POOL, name('extra-snap'))).toEqual(['snap', 'operator-kept']);
    expect(await ceph.snaps(POOL, name('other-schedule'))).toEqual(['snap']);
    // A recreated same-name VM's schedule never touches the old VM's images (maybe its only copy).
    for (const n of ['prev-vm-1', 'prev-vm-2']) expect(await ceph.snaps(POOL, name(n))).toEqual(['snap']);
  });

  it('the old VM’s own retention (its UUID) prunes its images and never the new VM’s', async () => {
    const r = await applyRetention(deps)({ pool: POOL, scheduleId: schedule, domain, domainUuid: OLD_VM_UUID, policy: { keepLast: 1 }, keepImages: [] });
    expect(r.pruned).toEqual([name('prev-vm-1')]);
    expect(r.kept).toEqual([name('prev-vm-2')]);
    const left = await ceph.images(POOL);
    expect(left).toContain(name('new'));
    expect(left).not.toContain(name('prev-vm-1'));
  });

  it('is idempotent: a retry prunes nothing more', async () => {
    const r = await applyRetention(deps)({ pool: POOL, scheduleId: schedule, domain, domainUuid: UUID, policy: { keepLast: 1 }, keepImages: [name('new')] });
    expect(r.pruned).toEqual([]);
    expect(r.skipped).toHaveLength(2);
  });
});
