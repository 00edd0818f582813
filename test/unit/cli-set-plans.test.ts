import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CliError } from '../../src/cli/exit-codes';
import { planDelete, planPrune } from '../../src/cli/set-plans';
import type { CatalogImage } from '../../src/model/restore-point';

/*
 * What vmsnap delete and vmsnap prune decide over a pool's catalog, before any removal. The lab
 * tests (test/integration/cli-lifecycle.test.ts) run the same refusals against real images.
 */
const POOL = 'images';
const SCOPE = { namespace: 'default', cluster: 'temporal-ns:abc' };
const UUID = '0b6d7c1e-1111-4000-8000-000000000001';
const NOW = Date.parse('2025-06-15T12:00:00Z');

function image(name: string, run: string, o: Record<string, string | undefined> = {}): CatalogImage {
  const meta: Record<string, string | undefined> = {
    'vmsnap.owner': 'vmsnap',
    'vmsnap.image': `${POOL}/${name}`,
    'vmsnap.domain': 'vm-42',
    'vmsnap.domain-uuid': UUID,
    'vmsnap.temporal-namespace': SCOPE.namespace,
    'vmsnap.cluster': SCOPE.cluster,
    'vmsnap.workflow-id': run,
    'vmsnap.created-at': '2025-06-10T03:00:00.000Z',
    'vmsnap.state': 'complete',
    'vmsnap.quiesced': 'true',
    ...o,
  };
  return { pool: POOL, name, sizeBytes: 1 << 20, meta: Object.fromEntries(Object.entries(meta).filter(([, v]) => v !== undefined)) as Record<string, string> };
}

const refusal = (fn: () => unknown): CliError => {
  try {
    fn();
  } catch (e) {
    if (e instanceof CliError) return e;
    throw e;
  }
  throw new Error('not refused');
};

describe('planDelete: only a whole, finished set vmsnap made of that VM here', () => {
  const del = (catalog: CatalogImage[], workflowId = 'r1', domain = 'vm-42') => planDelete(catalog, { pool: POOL, domain, workflowId, scope: SCOPE });

  it('takes every image of the run, by name or by UUID', () => {
    const catalog = [image('vm-42-vda-r1', 'r1'), image('vm-42-vdb-r1', 'r1'), image('vm-42-vda-r2', 'r2')];
    expect(del(catalog).images).toEqual(['vm-42-vda-r1', 'vm-42-vdb-r1']);
    expect(del(catalog, 'r1', UUID.toUpperCase()).owner).toMatchObject({ domain: 'vm-42', domainUuid: UUID, scope: SCOPE });
    // Workflow ids are unique per namespace: another namespace's run r1 is another set.
    expect(del([...catalog, image('theirs', 'r1', { 'vmsnap.temporal-namespace': 'other' })]).images).toEqual(['vm-42-vda-r1', 'vm-42-vdb-r1']);
  });

  it.each([
    ['no such run', [image('a', 'r2')], 'SetNotFound', /no image set of run r1/],
    ['only a clone of the set (a restored disk carries its keys)', [image('restored', 'r1', { 'vmsnap.image': `${POOL}/vm-42-vda-r1` })], 'SetNotFound', /no image set/],
    ['another VM’s run', [image('a', 'r1', { 'vmsnap.domain': 'vm-43', 'vmsnap.domain-uuid': '0b6d7c1e-9999-4000-8000-000000000009' })], 'NotOwned', /is of vm-43, not vm-42/],
    ['made before UUIDs were recorded', [image('a', 'r1', { 'vmsnap.domain-uuid': undefined })], 'NotOwned', /records no VM UUID/],
    ['made by another namespace', [image('a', 'r1', { 'vmsnap.temporal-namespace': 'other' })], 'NotOwned', /another Temporal namespace or fleet/],
    ['made by another fleet', [image('a', 'r1', { 'vmsnap.cluster': 'fleet-b' })], 'NotOwned', /another Temporal namespace or fleet/],
    ['one image still being flattened', [image('a', 'r1'), image('b', 'r1', { 'vmsnap.state': 'flattening' })], 'SetIncomplete', /not complete \(b: flattening\)/],
  ])('refuses %s (exit 2, typed)', (_what, catalog, type, message) => {
    const err = refusal(() => del(catalog));
    expect(err.exitCode).toBe(2);
    expect(err.type).toBe(type);
    expect(err.message).toMatch(message);
  });
});

describe('planPrune: retention over the VM’s sets', () => {
  const prune = (catalog: CatalogImage[], extra: { scheduleId?: string; domain?: string } = {}) =>
    planPrune(catalog, { pool: POOL, domain: extra.domain ?? 'vm-42', scope: SCOPE, policy: { keepLast: 1 }, now: NOW, ...(extra.scheduleId ? { scheduleId: extra.scheduleId } : {}) });

  it('plans per set, newest first, with the reasons it keeps one', () => {
    const catalog = [image('a', 'r1', { 'vmsnap.created-at': '2025-06-14T03:00:00Z' }), image('b', 'r2', { 'vmsnap.created-at': '2025-06-15T03:00:00Z' }), image('c', 'r2', { 'vmsnap.created-at': '2025-06-15T03:00:01Z' })];
    const plan = prune(catalog);
    expect(plan.sets.map((s) => [s.workflowId, s.images, s.reasons])).toEqual([
      ['r2', ['b', 'c'], ['last', 'newest']],
      ['r1', ['a'], []],
    ]);
    expect(plan.owner).toMatchObject({ domainUuid: UUID });
  });

  it('leaves alone (and counts) what is not vmsnap’s to prune here, and with --schedule every other schedule', () => {
    const catalog = [
      image('a', 'r1', { 'vmsnap.label.schedule': 'nightly' }),
      image('b', 'r2', { 'vmsnap.domain-uuid': undefined }),
      image('c', 'r3', { 'vmsnap.cluster': 'fleet-b' }),
      image('d', 'r4', { 'vmsnap.label.schedule': 'hourly' }),
    ];
    expect(prune(catalog)).toMatchObject({ ignored: 2 });
    expect(prune(catalog).sets.map((s) => s.workflowId).sort()).toEqual(['r1', 'r4']);
    expect(prune(catalog, { scheduleId: 'nightly' }).sets.map((s) => s.workflowId)).toEqual(['r1']);
  });

  it('refuses a name two VMs carried (AmbiguousDomain) and takes either by its UUID', () => {
    const other = '0b6d7c1e-2222-4000-8000-000000000002';
    const catalog = [image('a', 'r1'), image('b', 'r2', { 'vmsnap.domain-uuid': other })];
    const err = refusal(() => prune(catalog));
    expect([err.exitCode, err.type]).toEqual([2, 'AmbiguousDomain']);
    expect(prune(catalog, { domain: other }).sets.map((s) => s.workflowId)).toEqual(['r2']);
  });

  it('never plans to remove an image that planDelete would refuse to remove', () => {
    const arbImage = fc.record({
      run: fc.constantFrom('r1', 'r2', 'r3', 'r4'),
      uuid: fc.constantFrom(UUID, undefined, '0b6d7c1e-2222-4000-8000-000000000002'),
      ns: fc.constantFrom('default', 'other'),
      state: fc.constantFrom('complete', 'complete', 'cloned'),
      day: fc.integer({ min: 1, max: 14 }),
    });
    fc.assert(
      fc.property(fc.array(arbImage, { maxLength: 12 }), fc.constantFrom(UUID, 'vm-42'), (specs, domain) => {
        const catalog = specs.map((s, i) =>
          image(`img${i}`, s.run, { 'vmsnap.domain-uuid': s.uuid, 'vmsnap.temporal-namespace': s.ns, 'vmsnap.state': s.state, 'vmsnap.created-at': `2025-06-${String(s.day).padStart(2, '0')}T03:00:00Z` }),
        );
        let plan;
        try {
          plan = prune(catalog, { domain });
        } catch (e) {
          if (e instanceof CliError && e.type === 'AmbiguousDomain') return;
          throw e;
        }
        for (const set of plan.sets.filter((s) => !s.reasons.length)) {
          // A set prune removes is one delete would remove: same owner, complete, all of it.
          const d = planDelete(catalog, { pool: POOL, domain, workflowId: set.workflowId, scope: SCOPE });
          expect(d.images).toEqual([...set.images].sort());
        }
      }),
    );
  });
});
