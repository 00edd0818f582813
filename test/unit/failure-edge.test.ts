import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { atFailureEdge, toFailure } from '../../activities/failures';
import { createActivities } from '../../activities';
import { during, StepError } from '../../activities/step-error';
import { RbdError } from '../../src/ceph/errors';
import { ErrorCode, LibvirtError, LibvirtTimeoutError } from '../../src/libvirt/errors';
import { FailureType } from '../../src/model/failures';

const libvirtError = (code: number, message = `code ${code}`): LibvirtError =>
  new LibvirtError({ code, domain: 10, level: 2, message, procedure: 'REMOTE_PROC_X' });

function failureOf(err: unknown): ApplicationFailure {
  const f = toFailure(err);
  expect(f).toBeInstanceOf(ApplicationFailure);
  return f as ApplicationFailure;
}

describe('the failure edge', () => {
  it.each([
    ['EPERM', new RbdError(1, 'rbd_open'), FailureType.PermissionDenied, true],
    ['EACCES', new RbdError(13, 'rbd_open'), FailureType.PermissionDenied, true],
    ['ESHUTDOWN (blocklisted)', new RbdError(108, 'rbd_snap_create'), FailureType.PermissionDenied, true],
    ['ETIMEDOUT', new RbdError(110, 'rados_connect'), FailureType.Unavailable, false],
    ['another errno', new RbdError(5, 'rbd_write'), FailureType.RbdError, false],
    ['no domain', libvirtError(ErrorCode.NO_DOMAIN), FailureType.DomainNotFound, true],
    ['agent unresponsive', libvirtError(ErrorCode.AGENT_UNRESPONSIVE), FailureType.Unavailable, false],
    ['another libvirt code', libvirtError(ErrorCode.INTERNAL_ERROR), FailureType.LibvirtError, false],
    ['a libvirt call timing out', new LibvirtTimeoutError('REMOTE_PROC_X', 100), FailureType.Unavailable, false],
    ['anything else', new TypeError('x is undefined'), FailureType.InternalError, false],
  ] as const)('translates %s to its type, keeping the native code and the raw error', (_what, raw, type, nonRetryable) => {
    const f = failureOf(raw);
    expect(f).toMatchObject({ type, nonRetryable, message: raw.message });
    expect(f.cause).toBe(raw);
    if (raw instanceof RbdError) expect(f.details).toEqual([{ errno: raw.errno, code: raw.code, call: raw.call }]);
    if (raw instanceof LibvirtError) expect(f.details).toEqual([{ libvirtCode: raw.code, libvirtDomain: 10, procedure: 'REMOTE_PROC_X' }]);
  });

  it('passes an ApplicationFailure an activity built, and a cancellation, through unchanged', () => {
    const built = ApplicationFailure.nonRetryable('pool x does not exist', FailureType.PoolUnavailable);
    expect(toFailure(built)).toBe(built);
    const cancelled = new CancelledFailure('cancelled');
    expect(toFailure(cancelled)).toBe(cancelled);
  });

  it('says what the step was doing, and types the failure from its cause', async () => {
    const raw = new RbdError(2, 'rbd_open');
    const err = await during('open clone', () => Promise.reject(raw)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StepError);
    const f = failureOf(err);
    expect(f).toMatchObject({ type: FailureType.RbdError, nonRetryable: false, message: 'open clone: rbd_open: ENOENT (2)' });
    expect(f.cause).toBe(raw);
  });

  it('gives a step its own type, except for the cause types it keeps', () => {
    const asThaw = { type: FailureType.ThawFailed, nonRetryable: false } as const;
    expect(failureOf(new StepError('thaw g1', libvirtError(ErrorCode.NO_DOMAIN), asThaw))).toMatchObject({ type: FailureType.ThawFailed, nonRetryable: false });
    const asFreeze = { type: FailureType.FreezeFailed, nonRetryable: true, keep: [FailureType.QuiesceUnavailable] } as const;
    expect(failureOf(new StepError('freeze g1', libvirtError(ErrorCode.AGENT_UNRESPONSIVE), asFreeze))).toMatchObject({ type: FailureType.FreezeFailed, nonRetryable: true });
    const notConfigured = libvirtError(ErrorCode.ARGUMENT_UNSUPPORTED, 'argument unsupported: QEMU guest agent is not configured');
    expect(failureOf(new StepError('freeze g1', notConfigured, asFreeze)).type).toBe(FailureType.QuiesceUnavailable);
  });

  it('leaves a failure the step decided alone, unless the step has a type of its own', async () => {
    const busy = ApplicationFailure.retryable('g1 is frozen by another vmsnap run', FailureType.DomainBusy);
    expect(await during('prepare freeze of g1', () => Promise.reject(busy)).catch((e: unknown) => e)).toBe(busy);
    const asSnap = { type: FailureType.SnapshotFailed, nonRetryable: true } as const;
    const f = failureOf(await during('snapshot disks', () => Promise.reject(busy), asSnap).catch((e: unknown) => e));
    expect(f).toMatchObject({ type: FailureType.SnapshotFailed, nonRetryable: true, message: 'snapshot disks: g1 is frozen by another vmsnap run' });
    const cancelled = new CancelledFailure('cancelled');
    expect(await during('flatten', () => Promise.reject(cancelled), asSnap).catch((e: unknown) => e)).toBe(cancelled);
  });

  it('wraps every function of an activity set, keeping names and results', async () => {
    const raw = new RbdError(13, 'rbd_open');
    const edged = atFailureEdge({ ok: async (n: number) => n + 1, fails: async () => Promise.reject(raw) });
    expect(Object.keys(edged)).toEqual(['ok', 'fails']);
    expect(edged.ok.name).toBe('ok');
    expect(await edged.ok(1)).toBe(2);
    const f = await edged.fails().catch((e: unknown) => e);
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f).toMatchObject({ type: FailureType.PermissionDenied, nonRetryable: true });
  });

  it('is applied to every activity createActivities returns: none lets a raw error out', async () => {
    // Every adapter refuses (a cephx key without rights); every other use of deps fails as a bug would.
    const refused = new RbdError(13, 'rados_connect');
    const deps = new Proxy({}, { get: (_t, prop) => (prop === 'then' ? undefined : () => Promise.reject(refused)) });
    const activities = createActivities(deps as never);
    const types = new Set<string>(Object.values(FailureType));
    expect(Object.keys(activities).length).toBeGreaterThan(10);
    for (const [name, fn] of Object.entries(activities)) {
      const err = await (fn as (req: unknown) => Promise<unknown>)({ snaps: [], disks: [], images: [], domain: {}, plan: { disks: [] } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (err === undefined) continue; // nothing to do for an empty request
      expect(err, name).toBeInstanceOf(ApplicationFailure);
      expect(types.has((err as ApplicationFailure).type!), `${name}: ${(err as ApplicationFailure).type}`).toBe(true);
    }
  });
});
