import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../support/lab/cli-tools';
import { loadLabEnv } from '../../support/lab/env';
import { LibvirtAuthError, LibvirtClient, LibvirtError } from '../../src/libvirt';
import { AuthType, REMOTE_PROGRAM, RemoteProcedure } from '../../src/libvirt/procedures';
import { Transport } from '../../src/libvirt/transport';
import { XdrReader, XdrWriter } from '../../src/libvirt/xdr';
import { execFile } from 'node:child_process';
import { checkLibvirt } from '../../src/cli/doctor/libvirt-checks';
import { Exit } from '../../src/cli/exit-codes';
import { loadConfig } from '../../src/config';
import { need } from '../../support/lab/env';
import { snapshotFsState } from '../../support/lab/probe';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv, vmsnapCli } from '../helpers/cli';
import { uniqueId } from '../helpers/harness';

// Host B's libvirtd runs Debian's stock authentication (polkit on the unix sockets, lab/libvirt.sh);
// a scratch libvirtd wants SASL, which vmsnap does not implement.
const env = loadLabEnv();
const hostB = env.hosts?.b;
const guestB = env.guests?.hostB;
if (!hostB || !guestB) throw new Error(`the lab env in ${env.dir} has no host B: run npm run lab:up`);
const LIBVIRT_SH = path.resolve(__dirname, '../../lab/libvirt.sh');
const BIN = path.resolve(__dirname, '../../bin/vmsnap.js');

/** `vmsnap ARGV` as uid/gid 65534 (nobody): a worker that is not root, with no polkit rule and no D-Bus here. */
function vmsnapAsNobody(argv: string[], vars: NodeJS.ProcessEnv): Promise<{ code: number; stderr: string }> {
  const args = ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, BIN, ...argv];
  return new Promise((resolve) => {
    execFile('setpriv', args, { env: vars, timeout: 30_000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr });
    });
  });
}

/** One connection that says only what the test tells it to: no authentication step of its own. */
async function rawConnection(socketPath: string): Promise<Transport> {
  const socket = await new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect({ path: socketPath }, () => resolve(s));
    s.once('error', reject);
  });
  return new Transport(socket);
}

describe("host B: libvirtd with Debian's stock polkit auth", () => {
  const ceph = new CephView(env.raw);

  it('is configured as a stock host; CONNECT_OPEN before AUTH_LIST is refused; AUTH_LIST lets root in', async () => {
    const conf = readFileSync(path.join(path.dirname(path.dirname(hostB.libvirt.socket)), 'libvirtd.conf'), 'utf8');
    expect(conf).toMatch(/^auth_unix_rw = "polkit"$/m);
    expect(conf).toMatch(/^auth_unix_ro = "polkit"$/m);
    const t = await rawConnection(hostB.libvirt.socket);
    try {
      // What vmsnap did before it authenticated: libvirtd refuses (virNetServerProgramDispatchCall).
      const open = new XdrWriter().optionalString('qemu:///system').uint(0).toBuffer();
      const refused = await t.call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.CONNECT_OPEN, payload: open, timeoutMs: 5000 }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LibvirtError);
      expect((refused as LibvirtError).message).toMatch(/authentication required/);
      // For a root peer libvirtd settles polkit inside AUTH_LIST (it answers [none], no polkitd
      // asked); a non-root peer gets [polkit] and must call AUTH_POLKIT (next test).
      const list = new XdrReader(await t.call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.AUTH_LIST, timeoutMs: 5000 }));
      expect(list.array((r) => r.int())).toEqual([AuthType.NONE]);
      await t.call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.CONNECT_OPEN, payload: open, timeoutMs: 5000 });
    } finally {
      t.destroy();
    }
  });

  it('as root: freeze, RBD snapshot, thaw through host B — the snapshot is quiesced, truly (no ext4 journal replay needed)', async () => {
    const lv = await LibvirtClient.connect({ uri: hostB.libvirt.uri });
    const dom = await lv.lookupDomain(guestB);
    const [pool, image] = ['vms', `${guestB}-vdb`];
    const snap = uniqueId('polkit');
    try {
      expect(await lv.fsFreeze(dom)).toBe(1);
      try {
        await ceph.rbd('snap', 'create', `${pool}/${image}@${snap}`);
      } finally {
        expect(await lv.fsThaw(dom)).toBe(1);
      }
      expect(await lv.fsFreezeStatus(dom)).toBe('thawed');
      const state = await snapshotFsState({ cephConf: need(env.raw, 'CEPH_CONF'), id: 'admin', keyring: need(env.raw, 'CEPH_KEYRING'), pool, image, snap });
      expect(state).not.toBe('needs_recovery');
    } finally {
      await lv.fsThaw(dom).catch(() => 0);
      await ceph.rbd('snap', 'rm', `${pool}/${image}@${snap}`).catch(() => undefined);
      await lv.close();
    }
  });

  it('as root: `vmsnap thaw` through host B ends a freeze (the emergency path works on a stock host)', async () => {
    const lv = await LibvirtClient.connect({ uri: hostB.libvirt.uri });
    const dom = await lv.lookupDomain(guestB);
    try {
      expect(await lv.fsFreeze(dom)).toBe(1);
      const r = await vmsnapCli(['thaw', guestB], cliEnv(env.raw, { VMSNAP_LIBVIRT_URI: hostB.libvirt.uri }));
      expect(r.stderr).not.toMatch(/authentication/);
      expect(r.code).toBe(Exit.ok);
      expect(r.stdout).toMatch(/frozen → thawed \(1 filesystem/);
      expect(await lv.fsFreezeStatus(dom)).toBe('thawed');
    } finally {
      await lv.fsThaw(dom).catch(() => 0);
      await lv.close();
    }
  });

  it('not root, no polkit rule (no D-Bus here): AUTH_POLKIT is refused at once, exit 6 naming polkit and the fix', async () => {
    const t0 = Date.now();
    const r = await vmsnapAsNobody(['thaw', guestB], { PATH: process.env.PATH, HOME: '/tmp', VMSNAP_LIBVIRT_URI: hostB.libvirt.uri, VMSNAP_STATE_DIR: '/tmp' });
    expect(r.code).toBe(Exit.authRefused);
    expect(r.stderr).toMatch(/refused polkit authentication for uid 65534 \(org\.libvirt\.unix\.manage\)/);
    expect(r.stderr).toMatch(/fix: .*D-Bus and polkitd/);
    expect(Date.now() - t0).toBeLessThan(15_000); // no wait for a D-Bus timeout
  });
});

describe('a libvirtd that wants SASL (scratch, guest-less)', () => {
  let uri = '';
  beforeAll(async () => {
    uri = (await run('env', [`LAB_DIR=${env.dir}`, 'bash', LIBVIRT_SH, 'scratch-up', 'sasl', 'sasl'], 60_000)).stdout.trim();
  }, 70_000);
  afterAll(async () => {
    await run('env', [`LAB_DIR=${env.dir}`, 'bash', LIBVIRT_SH, 'scratch-down', 'sasl'], 60_000);
  }, 70_000);

  it('connect fails with a typed LibvirtAuthError that names the scheme and the fix', async () => {
    const err = await LibvirtClient.connect({ uri }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LibvirtAuthError);
    expect(err).toMatchObject({ scheme: 'sasl', retryable: false });
    expect((err as Error).message).toMatch(/requires sasl authentication \(auth_unix_rw = "sasl"\), which vmsnap does not implement; fix: set auth_unix_rw = "polkit"/);
  });

  it('`vmsnap thaw` exits 6 naming SASL; doctor\'s libvirt check has the auth hint, not "start libvirtd"', async () => {
    const thaw = await vmsnapCli(['thaw', guestB], cliEnv(env.raw, { VMSNAP_LIBVIRT_URI: uri }));
    expect(thaw.code).toBe(Exit.authRefused);
    expect(thaw.stderr).toMatch(/requires sasl authentication/);
    // doctor's own check, in-process (the whole `vmsnap doctor` also waits ~25 s on the fleet query here).
    const { checks } = await checkLibvirt(loadConfig({ libvirt: { uri } }, {}), { agentTimeoutSec: 1 });
    expect(checks).toEqual([expect.objectContaining({ name: 'libvirt', status: 'fail', authRefused: true })]);
    expect(checks[0]!.detail).toMatch(/refused authentication: .*requires sasl authentication/);
    expect(checks[0]!.fix).toMatch(/^set auth_unix_rw = "polkit"/);
  });
});
