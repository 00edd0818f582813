import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model/failures';
import { VERIFY_META } from '../../src/model/metadata-keys';
import { parseRestoreInput } from '../../src/model/restore-input';
import { encodeRestorePoint, imageSetsOf, RESTORE_POINT_KEY } from '../../src/model/restore-point';
import type { CatalogImage } from '../../src/model/restore-point';
import { META } from '../../src/model/types';
import { copyName, decodeVerification, encodeVerification, isVerdictFailure, parseVerifyInput } from '../../src/model/verification';
import { rewriteForNewDomain, withoutInterfaces } from '../../src/restore/domain-xml-rewrite';

const XML = `<domain type='kvm'>
  <name>vm1</name>
  <uuid>6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162</uuid>
  <devices>
    <disk type='network' device='disk'>
      <source protocol='rbd' name='vms/vm1-vdb'/>
      <target dev='vdb' bus='virtio'/>
    </disk>
    <interface type='network'>
      <mac address='52:54:00:12:34:56'/>
      <source network='default'/>
      <model type='virtio'/>
    </interface>
    <interface type='bridge'><source bridge='br0'/></interface>
    <interface type='user'/>
    <serial type='file'><source path='/var/lab/vm1/serial.log'/></serial>
  </devices>
</domain>
`;

describe('vmsnap verify: the throw-away copy', () => {
  it('isolate: every <interface> goes, nothing else changes', () => {
    const out = withoutInterfaces(XML);
    expect(out).not.toContain('<interface');
    expect(out).not.toContain('br0');
    expect(out).toBe(XML.replace(/ {4}<interface[\s\S]*<interface type='user'\/>\n/, ''));
    const copy = rewriteForNewDomain(XML, { name: 'vm1-verify-x', uuid: '11111111-2222-4333-8444-555555555555', disks: new Map([['vms/vm1-vdb', 'vms/vm1-verify-x-vdb']]), isolate: true });
    expect(copy).not.toContain('<interface');
    expect(copy).toContain("name='vms/vm1-verify-x-vdb'");
    expect(copy).toContain("path='/var/lab/vm1/vm1-verify-x.serial.log'");
    // Without isolate a new VM keeps its NICs (restore --as).
    expect(rewriteForNewDomain(XML, { name: 'c', uuid: '11111111-2222-4333-8444-555555555555', disks: new Map() })).toContain("<interface type='bridge'>");
  });

  it('input: bad requests are refused before anything starts; a throw-away copy is an isolated --as', () => {
    expect(parseVerifyInput({ domain: 'vm1' })).toMatchObject({ ok: true, input: { from: 'latest', readyTimeoutMs: 300_000, checkTimeoutMs: 60_000 } });
    expect(parseVerifyInput({ domain: 'vm1', check: ['pg_isready', '-q'] }).ok).toBe(true);
    for (const bad of [{ domain: 'bad/name' }, { domain: 'vm1', check: [] }, { domain: 'vm1', from: '-x' }, { domain: 'vm1', readyTimeoutMs: 0 }, { domain: 'vm1', extra: 1 }]) {
      expect(parseVerifyInput(bad).ok, JSON.stringify(bad)).toBe(false);
    }
    expect(parseRestoreInput({ domain: 'vm1', as: 'c', isolate: true, throwaway: {} }).ok).toBe(true);
    expect(parseRestoreInput({ domain: 'vm1', as: 'c', throwaway: {} }).ok).toBe(false);
    expect(parseRestoreInput({ domain: 'vm1', isolate: true }).ok).toBe(false);
  });

  it('a set that does not come up is a verdict; an unreachable cluster or a failed clean-up is the run’s own failure', () => {
    for (const t of [FailureType.GuestNotReady, FailureType.DomainStartFailed, FailureType.RestoreRecordUntrusted, FailureType.RestorePointIncomplete, FailureType.DefinitionRefused]) {
      expect(isVerdictFailure(t), t).toBe(true);
    }
    for (const t of [FailureType.Unavailable, FailureType.CompensationFailed, FailureType.InvalidInput, FailureType.RestorePointNotFound, FailureType.NameConflict, undefined]) {
      expect(isVerdictFailure(t), String(t)).toBe(false);
    }
  });

  it('the copy’s name is the source’s, shortened, with the run’s suffix: a valid, distinct domain name', () => {
    expect(copyName('vmsnap-deb', '0190f3a2-7c1e-7d2b-9a3f-1b2c3d4e5f60')).toBe('vmsnap-deb-verify-0190f3a2');
    expect(copyName('x'.repeat(60), 'abc').length).toBeLessThanOrEqual(40 + 8 + 8);
  });

  it('the verdict is read back from the set’s images (the newest wins), and junk is ignored', () => {
    const at = '2026-12-04T04:00:00.000Z';
    const img = (name: string, verify?: string): CatalogImage => ({
      pool: 'images',
      name,
      sizeBytes: 1,
      meta: {
        [META.owner]: 'vmsnap', [META.image]: `images/${name}`, [META.workflowId]: 'snap-1', [META.domain]: 'vm1', [META.createdAt]: at, [META.state]: 'complete',
        [RESTORE_POINT_KEY]: encodeRestorePoint({ workflowId: 'snap-1', runId: 'r', domain: { name: 'vm1', uuid: '6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162' }, quiesced: true, recordedAt: at, disks: [{ target: 'vda', image: 'images/a', source: 'vms/a' }, { target: 'vdb', image: 'images/b', source: 'vms/b' }], domainXml: '<domain/>' }),
        ...(verify ? { [VERIFY_META]: verify } : {}),
      },
    });
    const older = encodeVerification({ verdict: 'failed', reason: 'GuestNotReady: x', at: '2026-12-03T00:00:00.000Z', workflowId: 'v0' });
    const newer = encodeVerification({ verdict: 'verified', at, workflowId: 'v1', readyMs: 12_000 });
    expect(imageSetsOf('vm1', [img('a', older), img('b', newer)])[0]!.verification).toMatchObject({ verdict: 'verified', workflowId: 'v1' });
    expect(imageSetsOf('vm1', [img('a'), img('b', '{not json')])[0]!.verification).toBeUndefined();
    expect(decodeVerification(JSON.stringify({ verdict: 'maybe', at }))).toBeUndefined();
  });
});
