import { describe, expect, it } from 'vitest';
import { replacedScopeMetadata, restoreLeftoverAction, restoreScopeMetadata, throwawayCopyToEnd } from '../../src/model/restore-leftovers';
import { restoredDomainUuid } from '../../src/model/restore-plan';
import type { LeftoverContext, RunStatus } from '../../src/model/restore-leftovers';
import { RESTORE_META } from '../../src/model/restore-point';

const scope = { namespace: 'default', cluster: 'c1' };
const other = { namespace: 'other', cluster: 'c1' };
const NOW = Date.parse('2026-01-02T00:00:00Z');
const HOUR = 3600_000;

const ctx = (status: RunStatus, o: Partial<LeftoverContext> = {}): LeftoverContext => ({
  scope, host: 'hv-a', now: NOW, keepReplacedMs: 24 * HOUR, inUse: false, statusOf: () => status, ...o,
});
const clone = (s = scope, host = 'hv-a') => ({ [RESTORE_META.workflowId]: 'restore-1', ...restoreScopeMetadata(s, host) });
const replaced = (at: string, s = scope, host = 'hv-a') => ({ [RESTORE_META.replacedBy]: 'restore-2', [RESTORE_META.replacedAt]: at, ...replacedScopeMetadata(s, host) });

describe('restoreLeftoverAction: a restored disk', () => {
  it.each(['TERMINATED', 'TIMED_OUT', 'FAILED', 'CANCELLED'] as const)('of a restore that ended %s is removed', (status) => {
    expect(restoreLeftoverAction(clone(), ctx(status))).toEqual({ action: 'remove-clone', workflowId: 'restore-1', status });
  });

  it.each(['RUNNING', 'COMPLETED', 'NOT_FOUND', 'UNKNOWN', 'CONTINUED_AS_NEW'] as const)('of a restore that is %s is left', (status) => {
    expect(restoreLeftoverAction(clone(), ctx(status)).action).toBe('leave');
  });

  it('is never removed while a domain defined on this host uses it', () => {
    expect(restoreLeftoverAction(clone(), ctx('TERMINATED', { inUse: true })).action).toBe('leave');
  });

  it("is left when another namespace's restore made it, or no scope was recorded", () => {
    expect(restoreLeftoverAction(clone(other), ctx('TERMINATED')).action).toBe('leave');
    expect(restoreLeftoverAction({ [RESTORE_META.workflowId]: 'restore-1' }, ctx('TERMINATED')).action).toBe('leave');
  });

  it('is left by every host but the one that made it, and when no maker host was recorded', () => {
    expect(restoreLeftoverAction(clone(scope, 'hv-b'), ctx('TERMINATED')).action).toBe('leave');
    const legacy: Record<string, string> = clone();
    delete legacy['vmsnap.restore.host'];
    expect(restoreLeftoverAction(legacy, ctx('TERMINATED')).action).toBe('leave');
  });
});

describe('restoreLeftoverAction: a replaced disk', () => {
  it('of a completed restore is removed once it is older than keepReplacedMs, kept before', () => {
    expect(restoreLeftoverAction(replaced('2026-01-01T00:00:00Z'), ctx('COMPLETED'))).toEqual({
      action: 'remove-replaced', workflowId: 'restore-2', replacedAt: '2026-01-01T00:00:00Z',
    });
    expect(restoreLeftoverAction(replaced('2026-01-01T00:00:01Z'), ctx('COMPLETED')).action).toBe('leave');
    expect(restoreLeftoverAction(replaced('2026-01-01T23:59:59Z'), ctx('COMPLETED', { keepReplacedMs: 0 })).action).toBe('remove-replaced');
  });

  it.each(['RUNNING', 'TERMINATED', 'FAILED', 'NOT_FOUND', 'UNKNOWN'] as const)('of a restore that is %s is left (the swap may not be final)', (status) => {
    expect(restoreLeftoverAction(replaced('2020-01-01T00:00:00Z'), ctx(status)).action).toBe('leave');
  });

  it('is judged by the restore that replaced it even when an earlier restore made it', () => {
    const meta = { ...clone(), ...replaced('2020-01-01T00:00:00Z') };
    expect(restoreLeftoverAction(meta, ctx('COMPLETED')).action).toBe('remove-replaced');
    expect(restoreLeftoverAction(meta, ctx('TERMINATED')).action).toBe('leave');
  });

  it('is left in use, out of scope, without a scope, or without a readable time', () => {
    expect(restoreLeftoverAction(replaced('2020-01-01T00:00:00Z'), ctx('COMPLETED', { inUse: true })).action).toBe('leave');
    expect(restoreLeftoverAction(replaced('2020-01-01T00:00:00Z', other), ctx('COMPLETED')).action).toBe('leave');
    expect(restoreLeftoverAction({ [RESTORE_META.replacedBy]: 'restore-2', [RESTORE_META.replacedAt]: '2020-01-01T00:00:00Z' }, ctx('COMPLETED')).action).toBe('leave');
    expect(restoreLeftoverAction(replaced('yesterday'), ctx('COMPLETED')).action).toBe('leave');
  });

  it("is left by every host but the one whose restore replaced it", () => {
    expect(restoreLeftoverAction(replaced('2020-01-01T00:00:00Z', scope, 'hv-b'), ctx('COMPLETED')).action).toBe('leave');
  });

  it('an image no restore touched is left', () => {
    expect(restoreLeftoverAction({ 'vmsnap.owner': 'vmsnap' }, ctx('TERMINATED')).action).toBe('leave');
  });
});

describe('throwawayCopyToEnd: a disk of a verify copy', () => {
  const copyUuid = restoredDomainUuid('restore-1');
  const copy = { name: 'vm-42-verify-ab12cd34', uuid: copyUuid };
  const marked = (s = scope, host = 'hv-a') => ({ ...clone(s, host), [RESTORE_META.throwaway]: '1' });
  const at = (status: RunStatus, users = [copy], host = 'hv-a') => ({ scope, host, statusOf: () => status, users });

  it.each(['TERMINATED', 'TIMED_OUT', 'FAILED', 'CANCELLED', 'COMPLETED'] as const)('whose restore is %s: its copy is ended', (status) => {
    expect(throwawayCopyToEnd(marked(), at(status))).toEqual({ workflowId: 'restore-1', status, domains: [copy] });
  });

  it.each(['RUNNING', 'NOT_FOUND', 'UNKNOWN', 'CONTINUED_AS_NEW'] as const)('whose restore is %s: left (never on a guess)', (status) => {
    expect(throwawayCopyToEnd(marked(), at(status))).toBeNull();
  });

  it('not marked throw-away (restore --as): the VM it made is never ended', () => {
    expect(throwawayCopyToEnd(clone(), at('TERMINATED'))).toBeNull();
  });

  it('used by any domain but the copy that restore defined (another UUID): left', () => {
    expect(throwawayCopyToEnd(marked(), at('TERMINATED', [copy, { name: 'vm-42', uuid: '6f1c2a3b-0000-4000-8000-00000000a001' }]))).toBeNull();
    expect(throwawayCopyToEnd(marked(), at('TERMINATED', [{ ...copy, uuid: restoredDomainUuid('restore-2') }]))).toBeNull();
  });

  it('made by another host, or in another scope, or used by nothing here: left', () => {
    expect(throwawayCopyToEnd(marked(scope, 'hv-b'), at('TERMINATED'))).toBeNull();
    expect(throwawayCopyToEnd(marked(other), at('TERMINATED'))).toBeNull();
    expect(throwawayCopyToEnd(marked(), at('TERMINATED', []))).toBeNull();
  });
});
