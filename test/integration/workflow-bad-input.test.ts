import { readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { CephView } from '../helpers/ceph-inspect';
import { freezeStatus } from '../helpers/guest';
import { need } from '../../support/lab/env';

let h: Harness;
let ceph: CephView;
let g1: string;

beforeAll(async () => {
  h = await startHarness();
  ceph = new CephView(h.vars);
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
});
afterAll(async () => h?.stop());

async function typeOf(request: unknown): Promise<{ type: string; message: string; nonRetryable: boolean }> {
  const err = await h.client.workflow
    .execute('consistentSnapshot', { taskQueue: h.hw.taskQueue, workflowId: uniqueId('bad'), args: [request] })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  let c: unknown = (err as WorkflowFailedError).cause;
  while (c && !(c instanceof ApplicationFailure)) c = (c as { cause?: unknown }).cause;
  const f = c as ApplicationFailure;
  return { type: f.type ?? '', message: f.message, nonRetryable: !!f.nonRetryable };
}

function journal(): string[] {
  try {
    return readdirSync(path.join(h.config.stateDir, 'frozen')).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
}

async function snapshotState() {
  const images = await ceph.images('images');
  const snaps: string[] = [];
  for (const img of (await ceph.images('vms')).filter((i) => i.startsWith(`${g1}-`))) snaps.push(...(await ceph.snaps('vms', img)).map((s) => `${img}@${s}`));
  return { images, snaps };
}

describe('bad input: typed error, no freeze, nothing created', () => {
  const cases: [string, () => unknown, string][] = [
    ['unknown domain', () => ({ domain: 'no-such-domain' }), 'DomainNotFound'],
    ['domain with a slash', () => ({ domain: 'vms/evil' }), 'InvalidInput'],
    ['domain with @', () => ({ domain: 'vm@snap' }), 'InvalidInput'],
    ['domain with spaces', () => ({ domain: 'vm 42' }), 'InvalidInput'],
    ['domain with shell metacharacters', () => ({ domain: 'vm;$(reboot)' }), 'InvalidInput'],
    ['image name with @ and /', () => ({ domain: g1, target: { images: { vdb: 'x@y/z' } } }), 'InvalidInput'],
    ['pool with a space', () => ({ domain: g1, target: { pool: 'im ages' } }), 'InvalidInput'],
    ['negative deadline', () => ({ domain: g1, freezeDeadlineMs: -5 }), 'InvalidInput'],
    ['zero snapshot timeout', () => ({ domain: g1, snapshotTimeoutMs: 0 }), 'InvalidInput'],
    ['unknown field', () => ({ domain: g1, rm: '-rf' }), 'InvalidInput'],
    ['disk that is not attached', () => ({ domain: g1, disks: ['vdz'] }), 'UnsupportedDisk'],
    ['missing target pool', () => ({ domain: g1, target: { pool: 'nosuchpool' } }), 'PoolUnavailable'],
    ['not an object', () => 'vm-42', 'InvalidInput'],
  ];

  it.each(cases)('%s', async (_name, request, expected) => {
    const before = await snapshotState();
    const f = await typeOf(request());
    expect(f.type).toBe(expected);
    expect(f.nonRetryable).toBe(true);
    expect(f.message.length).toBeGreaterThan(10);
    expect(await freezeStatus(h.vars, g1)).toBe('thawed');
    // No freeze was ever attempted: the host guard journal stayed empty.
    expect(journal()).toEqual([]);
    expect(await snapshotState()).toEqual(before);
  });
});
