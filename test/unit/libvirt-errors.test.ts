import { describe, expect, it } from 'vitest';
import {
  decodeRemoteError,
  ErrorCode,
  isAgentNotConfigured,
  isAgentUnresponsive,
  isFrozenState,
  isInvalidState,
  isNoDomain,
  LibvirtError,
} from '../../src/libvirt/errors';
import { decodeFrame, MessageStatus } from '../../src/libvirt/packet';
import { procedureName } from '../../src/libvirt/procedures';
import { XdrReader } from '../../src/libvirt/xdr';
import { loadFrames } from '../fixtures/libvirt/frames';

/** Every error reply in a recording, decoded as the transport does. */
function recordedErrors(name: string): LibvirtError[] {
  return loadFrames(name)
    .filter((f) => f.dir === '<')
    .map((f) => decodeFrame(f.bytes))
    .filter((f) => f.header.status === MessageStatus.Error)
    .map((f) => decodeRemoteError(new XdrReader(f.payload), procedureName(f.header.program, f.header.procedure)));
}

describe('libvirt error decoding (recorded from libvirtd 9.0)', () => {
  const [noDomain, notConfigured, notConnected] = recordedErrors('errors');

  it('unknown domain: code 42, with libvirt message and procedure', () => {
    expect(noDomain).toMatchObject({
      code: ErrorCode.NO_DOMAIN,
      level: 2,
      procedure: 'REMOTE_PROC_DOMAIN_LOOKUP_BY_NAME',
      message: "Domain not found: no domain with matching name 'vmsnap-no-such-domain'",
    });
    expect(isNoDomain(noDomain)).toBe(true);
    expect(isAgentUnresponsive(noDomain)).toBe(false);
  });

  it('freeze without an agent channel: code 74 "QEMU guest agent is not configured", domain QEMU', () => {
    expect(notConfigured).toMatchObject({ code: 74, domain: 10, procedure: 'REMOTE_PROC_DOMAIN_FSFREEZE' });
    expect(notConfigured.message).toBe('argument unsupported: QEMU guest agent is not configured');
    expect(isAgentNotConfigured(notConfigured)).toBe(true);
  });

  it('freeze with a channel but no agent: code 86', () => {
    expect(notConnected).toMatchObject({ code: ErrorCode.AGENT_UNRESPONSIVE, domain: 10 });
    expect(notConnected.message).toMatch(/Guest agent is not responding/);
    expect(isAgentUnresponsive(notConnected)).toBe(true);
    expect(isAgentNotConfigured(notConnected)).toBe(false);
  });

  it('freeze while frozen: code 1 "agent is in frozen state"', () => {
    const [frozen] = recordedErrors('freeze-thaw');
    expect(frozen).toMatchObject({ code: 1, domain: 10, procedure: 'REMOTE_PROC_DOMAIN_FSFREEZE' });
    expect(isFrozenState(frozen)).toBe(true);
    expect(isInvalidState(frozen)).toBe(false);
  });

  it('code 74 for another reason is not "agent not configured"; helpers ignore foreign errors', () => {
    const other = new LibvirtError({ code: 74, domain: 10, level: 2, message: 'argument unsupported: flags', procedure: 'x' });
    expect(isAgentNotConfigured(other)).toBe(false);
    expect(isInvalidState(new LibvirtError({ code: 55, domain: 10, level: 2, message: 'domain is not running', procedure: 'x' }))).toBe(true);
    for (const check of [isNoDomain, isAgentUnresponsive, isAgentNotConfigured, isFrozenState, isInvalidState]) {
      expect(check(new Error('Domain not found'))).toBe(false);
      expect(check(undefined)).toBe(false);
    }
  });
});
