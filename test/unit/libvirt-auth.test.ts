import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { toFailure } from '../../activities/failures';
import { doctorExitCode } from '../../src/cli/commands/doctor';
import { fail, ok } from '../../src/cli/doctor/check';
import { checkLibvirt } from '../../src/cli/doctor/libvirt-checks';
import { connectLibvirt } from '../../src/cli/libvirt-session';
import { Exit } from '../../src/cli/exit-codes';
import { loadConfig } from '../../src/config';
import { isAuthRefused, LibvirtAuthError, LibvirtClient } from '../../src/libvirt';
import { ErrorCode } from '../../src/libvirt/errors';
import { AuthType, RemoteProcedure } from '../../src/libvirt/procedures';
import { FailureType } from '../../src/model/failures';
import { ManualPeer, type ManualPeerOptions } from '../fixtures/libvirt/replay';

/** Connects through a ManualPeer that answers the auth calls as `options` says; returns what the client sent. */
async function connectVia(options: ManualPeerOptions): Promise<{ result: LibvirtClient | unknown; procedures: () => number[] }> {
  const peers: ManualPeer[] = [];
  const result = await LibvirtClient.connect({
    dialer: async () => {
      const p = new ManualPeer(options);
      peers.push(p);
      return p;
    },
  }).catch((e: unknown) => e);
  return { result, procedures: () => peers.flatMap((p) => p.written.map((f) => f.header.procedure)) };
}

const { AUTH_LIST, AUTH_POLKIT, AUTH_SASL_INIT, CONNECT_OPEN } = RemoteProcedure;

describe('libvirt authentication, as libvirt\'s client does it (remoteAuthenticate)', () => {
  it('auth none: AUTH_LIST, then CONNECT_OPEN', async () => {
    const { result, procedures } = await connectVia({ authList: [AuthType.NONE] });
    expect(result).toBeInstanceOf(LibvirtClient);
    expect(procedures()).toEqual([AUTH_LIST, CONNECT_OPEN]);
    await (result as LibvirtClient).close();
  });

  it('polkit: AUTH_LIST, AUTH_POLKIT, then CONNECT_OPEN, before any domain call', async () => {
    const { result, procedures } = await connectVia({ authList: [AuthType.POLKIT] });
    expect(result).toBeInstanceOf(LibvirtClient);
    expect(procedures()).toEqual([AUTH_LIST, AUTH_POLKIT, CONNECT_OPEN]);
    await (result as LibvirtClient).close();
  });

  it('an empty list, or a libvirtd without AUTH_LIST (VIR_ERR_NO_SUPPORT), means no authentication', async () => {
    for (const authList of [[], { code: ErrorCode.NO_SUPPORT, message: 'this function is not supported by the connection driver' }]) {
      const { result, procedures } = await connectVia({ authList });
      expect(result).toBeInstanceOf(LibvirtClient);
      expect(procedures()).toEqual([AUTH_LIST, CONNECT_OPEN]);
      await (result as LibvirtClient).close();
    }
  });

  it('SASL: a typed, non-retryable LibvirtAuthError naming the scheme and the fix; nothing past AUTH_LIST is sent', async () => {
    const { result, procedures } = await connectVia({ authList: [AuthType.SASL] });
    expect(result).toBeInstanceOf(LibvirtAuthError);
    const err = result as LibvirtAuthError;
    expect(err).toMatchObject({ scheme: 'sasl', retryable: false });
    expect(err.message).toMatch(/requires sasl authentication \(auth_unix_rw = "sasl"\), which vmsnap does not implement/);
    expect(err.fix).toMatch(/auth_unix_rw = "polkit"/);
    expect(procedures()).toEqual([AUTH_LIST]);
    expect(procedures()).not.toContain(AUTH_SASL_INIT);
  });

  it('the first scheme offered is the one used, as in libvirt (sasl before polkit fails; polkit before sasl works)', async () => {
    expect(await connectVia({ authList: [AuthType.SASL, AuthType.POLKIT] }).then((r) => r.result)).toMatchObject({ scheme: 'sasl' });
    const { result } = await connectVia({ authList: [AuthType.POLKIT, AuthType.SASL] });
    expect(result).toBeInstanceOf(LibvirtClient);
    await (result as LibvirtClient).close();
  });

  it('polkit refused (VIR_ERR_AUTH_FAILED): non-retryable, names the polkit action and the uid; no CONNECT_OPEN', async () => {
    const { result, procedures } = await connectVia({ authList: [AuthType.POLKIT], polkit: { code: ErrorCode.AUTH_FAILED, message: 'authentication failed: access denied by policy' } });
    expect(isAuthRefused(result)).toBe(true);
    const err = result as LibvirtAuthError;
    expect(err).toMatchObject({ scheme: 'polkit', retryable: false, code: ErrorCode.AUTH_FAILED });
    expect(err.message).toMatch(/refused polkit authentication for uid \d+ \(org\.libvirt\.unix\.manage\): authentication failed/);
    expect(err.fix).toMatch(/polkit rule .*org\.libvirt\.unix\.manage/);
    expect(procedures()).toEqual([AUTH_LIST, AUTH_POLKIT]);
  });

  it('polkit unavailable (VIR_ERR_AUTH_UNAVAILABLE: libvirtd could not ask polkitd) is retryable', async () => {
    const { result } = await connectVia({ authList: [AuthType.POLKIT], polkit: { code: ErrorCode.AUTH_UNAVAILABLE, message: 'no polkit agent available' } });
    expect(result).toMatchObject({ scheme: 'polkit', retryable: true });
  });

  it('polkit with no D-Bus (libvirt 9.0: internal error "Unable to get system bus connection") is retryable too', async () => {
    const { result } = await connectVia({
      authList: [AuthType.POLKIT],
      polkit: { code: ErrorCode.INTERNAL_ERROR, message: 'internal error: Unable to get system bus connection: Could not connect: No such file or directory' },
    });
    expect(result).toMatchObject({ scheme: 'polkit', retryable: true });
    expect((result as LibvirtAuthError).fix).toMatch(/D-Bus and polkitd/);
  });

  it('an unknown scheme number is refused, named', async () => {
    const { result } = await connectVia({ authList: [7] });
    expect(result).toMatchObject({ scheme: 'unknown (7)', retryable: false });
  });

  it('crosses the failure edge as PermissionDenied, non-retryable unless polkitd may come back', () => {
    const sasl = new LibvirtAuthError('x', { scheme: 'sasl', socketPath: '/s', fix: 'f', retryable: false });
    expect(toFailure(sasl)).toMatchObject({ type: FailureType.PermissionDenied, nonRetryable: true, details: [{ libvirtAuthScheme: 'sasl', socket: '/s' }] });
    const later = new LibvirtAuthError('x', { scheme: 'polkit', socketPath: '/s', fix: 'f', retryable: true });
    expect(toFailure(later)).toMatchObject({ type: FailureType.PermissionDenied, nonRetryable: false });
  });
});

describe('an auth refusal at the CLI edge (fake libvirtd on a unix socket)', () => {
  let dir: string | undefined;
  let server: net.Server | undefined;
  afterEach(async () => {
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    if (dir) rmSync(dir, { recursive: true, force: true });
    server = dir = undefined;
  });

  async function fakeLibvirtd(options: ManualPeerOptions): Promise<string> {
    dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-auth-'));
    const sock = path.join(dir, 'libvirt-sock');
    server = net.createServer((s) => {
      const peer = new ManualPeer(options);
      s.pipe(peer).pipe(s);
      s.on('error', () => peer.destroy());
    });
    await new Promise<void>((r) => server!.listen(sock, r));
    return `qemu:///system?socket=${sock}`;
  }

  it('a CLI command exits 6 (authRefused), not 4 (unreachable), and says what refused', async () => {
    const uri = await fakeLibvirtd({ authList: [AuthType.SASL] });
    const err = await connectLibvirt(uri).catch((e: unknown) => e);
    expect(err).toMatchObject({ exitCode: Exit.authRefused });
    expect((err as Error).message).toMatch(/refused vmsnap: .*requires sasl authentication/);
  });

  it('doctor: its own hint (the auth setting, not "start libvirtd") and the auth-refused flag', async () => {
    const uri = await fakeLibvirtd({ authList: [AuthType.SASL] });
    const config = loadConfig({ libvirt: { uri } }, {});
    const { checks } = await checkLibvirt(config, { agentTimeoutSec: 1 });
    expect(checks).toHaveLength(1);
    expect(checks[0]).toMatchObject({ name: 'libvirt', status: 'fail', authRefused: true });
    expect(checks[0].detail).toMatch(/refused authentication: .*sasl/);
    expect(checks[0].fix).toMatch(/auth_unix_rw = "polkit"/);
    expect(checks[0].fix).not.toMatch(/start libvirtd/);
    expect(checks[0].unreachable).toBeUndefined();
    expect(doctorExitCode([ok('temporal', 'reachable'), ...checks])).toBe(Exit.authRefused);
    // A service that is down still wins: its refusal cannot be known yet.
    expect(doctorExitCode([fail('ceph', 'down', 'start it', true), ...checks])).toBe(Exit.unreachable);
  });
});
