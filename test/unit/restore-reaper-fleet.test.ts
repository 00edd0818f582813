import { describe, expect, it } from 'vitest';
import type { LibvirtClient } from '../../src/libvirt';
import type { ImageUsers } from '../../src/ceph';
import { replacedScopeMetadata, restoreScopeMetadata } from '../../src/model/restore-leftovers';
import type { RunStatus } from '../../src/model/restore-leftovers';
import { RESTORE_META } from '../../src/model/restore-point';
import { reapRestoreLeftovers } from '../../src/worker/restore-reaper';
import type { ReapPool } from '../../src/worker/restore-reaper';

/*
 * Issue 25 #5: every host reaps the shared pools, but a host judges "in use" from its own domains
 * only. Two hosts' reapers over one pool: the disk of an unfinished restore that an operator kept
 * (its VM defined, shut off, on host A) is never removed — by A (in use there) nor by B (not its
 * disk). And a disk whose VM runs (Ceph shows a watcher, or a lock owner) is never removed, even
 * by the host that made it and sees no domain using it. The pool here is a stand-in that
 * records removals; the Ceph side of `users` (rbd status / rbd lock ls) is src/ceph/image-users-cli.ts.
 */

const scope = { namespace: 'default', cluster: 'fleet-1' };

function sharedPool(images: Record<string, Record<string, string>>, users: Record<string, Partial<ImageUsers>> = {}) {
  const removed: string[] = [];
  const asked: string[] = [];
  const pool: ReapPool = {
    list: async () => Object.keys(images),
    metadata: async (_p, _ns, name) => images[name] ?? null,
    users: async (spec) => {
      asked.push(spec);
      const u = users[spec.split('/').pop()!];
      return { watchers: u?.watchers ?? [], lockers: u?.lockers ?? [] };
    },
    remove: async (_p, _ns, name) => {
      removed.push(name);
      delete images[name];
      return undefined;
    },
  };
  return { pool, removed, asked };
}

/** A host's libvirt: the domains defined there and the RBD disks each uses. */
function hostWith(domains: { name: string; disks: string[]; state: 'running' | 'shutoff' }[]): LibvirtClient {
  const xml = (d: (typeof domains)[number]) =>
    `<domain><name>${d.name}</name><uuid>00000000-0000-4000-8000-000000000001</uuid><devices>${d.disks
      .map((s) => `<disk type='network' device='disk'><source protocol='rbd' name='${s}'/><target dev='vdb'/></disk>`)
      .join('')}</devices></domain>`;
  return {
    listDomains: async () => domains.map((d) => ({ name: d.name, uuid: d.name, id: 1 })),
    getDomainXml: async (dom: { name: string }) => xml(domains.find((d) => d.name === dom.name)!),
    getDomainState: async (dom: { name: string }) => ({ state: domains.find((d) => d.name === dom.name)!.state }),
  } as unknown as LibvirtClient;
}

const reap = (host: string, lv: LibvirtClient, pool: ReapPool, status: RunStatus) =>
  reapRestoreLeftovers(lv, { scope, host, keepReplacedMs: 0, ioctx: async () => ({}) as never, statusOf: async () => status, cli: { conf: '/nonexistent' }, pool });

describe('restore reaper in a fleet', () => {
  it("two hosts' reapers, one pool, a kept restore disk shut off on host A: never removed", async () => {
    // An `--as` restore on hv-a was terminated after its clone; the operator kept the VM it
    // defined (shut off). A sibling disk in the same pool keeps hv-b's reaper scanning it.
    const { pool, removed } = sharedPool({
      'copy-vdb': { [RESTORE_META.workflowId]: 'restore-1', ...restoreScopeMetadata(scope, 'hv-a') },
      'vm-b-vdb': {},
    });
    const hvA = hostWith([{ name: 'copy', disks: ['vms/copy-vdb'], state: 'shutoff' }]);
    const hvB = hostWith([{ name: 'vm-b', disks: ['vms/vm-b-vdb'], state: 'running' }]);
    for (let pass = 0; pass < 3; pass++) {
      expect((await reap('hv-a', hvA, pool, 'TERMINATED')).removed).toEqual([]);
      expect((await reap('hv-b', hvB, pool, 'TERMINATED')).removed).toEqual([]);
    }
    expect(removed).toEqual([]);
  });

  it('nor a disk host A replaced and still keeps, seen from host B', async () => {
    const { pool, removed } = sharedPool({
      'g1-vdb': { [RESTORE_META.replacedBy]: 'restore-2', [RESTORE_META.replacedAt]: '2020-01-01T00:00:00Z', ...replacedScopeMetadata(scope, 'hv-a') },
      'vm-b-vdb': {},
    });
    await reap('hv-b', hostWith([{ name: 'vm-b', disks: ['vms/vm-b-vdb'], state: 'running' }]), pool, 'COMPLETED');
    expect(removed).toEqual([]);
  });

  it.each([
    ['a watcher (its VM runs somewhere)', { watchers: ['127.0.0.1:0/3141592653'] }],
    ['an exclusive-lock owner', { lockers: ['client.4242'] }],
  ])('a disk with %s is not removed, even by the host that made it', async (_what, users) => {
    const { pool, removed, asked } = sharedPool(
      { 'copy-vdb': { [RESTORE_META.workflowId]: 'restore-1', ...restoreScopeMetadata(scope, 'hv-a') }, 'vm-a-vdb': {} },
      { 'copy-vdb': users },
    );
    // hv-a no longer defines the VM (it was moved to another host by hand): only Ceph knows it is open.
    const r = await reap('hv-a', hostWith([{ name: 'vm-a', disks: ['vms/vm-a-vdb'], state: 'running' }]), pool, 'TERMINATED');
    expect(asked).toEqual(['vms/copy-vdb']);
    expect(removed).toEqual([]);
    expect(r.kept).toEqual([{ disk: 'vms/copy-vdb', reason: expect.stringMatching(/^restore restore-1 TERMINATED; kept: (open by|locked by)/) }]);
  });

  it('users that cannot be read (rbd timed out): kept; nobody: removed by its maker', async () => {
    const { pool, removed } = sharedPool({ 'copy-vdb': { [RESTORE_META.workflowId]: 'restore-1', ...restoreScopeMetadata(scope, 'hv-a') }, 'vm-a-vdb': {} });
    const lv = hostWith([{ name: 'vm-a', disks: ['vms/vm-a-vdb'], state: 'running' }]);
    const failing = { ...pool, users: async () => Promise.reject(new Error('rbd status vms/copy-vdb: ETIMEDOUT (110)')) };
    expect((await reap('hv-a', lv, failing, 'TERMINATED')).kept[0]!.reason).toContain('cannot tell who has it open');
    expect(removed).toEqual([]);
    expect((await reap('hv-a', lv, pool, 'TERMINATED')).removed).toEqual(['vms/copy-vdb (restore restore-1 TERMINATED)']);
  });
});
