import { describe, expect, it } from 'vitest';
import type { MirrorPeerSite } from '../../src/ceph';
import type { ImageMirroring } from '../../src/cli/mirror/image';
import { disablePlan, enablePlan } from '../../src/cli/mirror/plan';
import { poolRefusal } from '../../src/cli/mirror/pool';

/*
 * `vmsnap mirror`'s decisions, from what Ceph reported (src/cli/mirror/plan.ts, pool.ts): the cases
 * the lab cannot show without changing the shared cluster's pool-level mirroring (a pool in `pool`
 * mode, one with no peer, or only an rx-only one). test/integration/cli-mirror.test.ts runs the rest.
 */

const img = (o: Partial<ImageMirroring>): ImageMirroring => ({ exists: true, state: 'disabled', primary: false, globalId: '', exclusiveLock: true, sites: [], ...o });
const peer = (o: Partial<MirrorPeerSite>): MirrorPeerSite => ({ uuid: 'u1', direction: 'tx-only', siteName: 'dr', mirrorUuid: 'm1', clientName: 'client.rbd-mirror-peer', lastSeen: 0, ...o });

describe('pool prerequisites of mirror enable', () => {
  it('image mode with a peer that registered and pulls: ready', () => {
    expect(poolRefusal({ spec: 'vms', mode: 'image', peers: [peer({})] })).toBeUndefined();
    expect(poolRefusal({ spec: 'vms', mode: 'image', peers: [peer({ direction: 'rx-tx' })] })).toBeUndefined();
  });
  it('mirroring disabled, or pool mode: refused with the command that sets image mode', () => {
    expect(poolRefusal({ spec: 'vms', mode: 'disabled', peers: [] })?.fix).toContain('`rbd mirror pool enable vms image`');
    expect(poolRefusal({ spec: 'vms/ns1', mode: 'pool', peers: [peer({})] })?.fix).toContain('`rbd mirror pool enable vms/ns1 image`');
  });
  it('no peer, only an rx-only one, or one whose rbd-mirror never registered: refused, naming the bootstrap commands', () => {
    for (const peers of [[], [peer({ direction: 'rx-only' })], [peer({ mirrorUuid: '' })]]) {
      const why = poolRefusal({ spec: 'vms', mode: 'image', peers });
      expect(why?.problem).toContain('no peer site that pulls from it');
      expect(why?.fix).toContain('rbd mirror pool peer bootstrap create');
    }
  });
});

describe('mirror enable / disable plans', () => {
  it('enable: exclusive-lock first when missing; nothing when already snapshot-mode primary (idempotent)', () => {
    expect(enablePlan(img({ exclusiveLock: false }))).toEqual({ steps: ['exclusive-lock', 'mirror-enable'] });
    expect(enablePlan(img({}))).toEqual({ steps: ['mirror-enable'] });
    expect(enablePlan(img({ state: 'enabled', mode: 'snapshot', primary: true }))).toEqual({ steps: [] });
  });
  it('enable refuses journal mode, a copy, a disable in progress, a missing image', () => {
    expect(enablePlan(img({ state: 'enabled', mode: 'journal', primary: true }))).toMatchObject({ refused: expect.stringContaining('journal mode') as string });
    expect(enablePlan(img({ state: 'enabled', mode: 'snapshot', primary: false }))).toMatchObject({ refused: expect.stringContaining('not primary') as string });
    expect(enablePlan(img({ state: 'disabling' }))).toHaveProperty('refused');
    expect(enablePlan(img({ exists: false }))).toEqual({ refused: 'no such image' });
  });
  it('disable: nothing when not mirrored; refuses a copy; finishes a disable in progress', () => {
    expect(disablePlan(img({}))).toEqual({ steps: [] });
    expect(disablePlan(img({ state: 'enabled', mode: 'snapshot', primary: true }))).toEqual({ steps: ['mirror-disable'] });
    expect(disablePlan(img({ state: 'enabled', mode: 'snapshot', primary: false }))).toHaveProperty('refused');
    expect(disablePlan(img({ state: 'disabling' }))).toEqual({ steps: ['mirror-disable'] });
  });
});
