/**
 * The authentication step of a new connection, run before CONNECT_OPEN the way libvirt's own
 * client runs it (remote_driver.c `remoteAuthenticate`): ask which schemes the socket accepts
 * (REMOTE_PROC_AUTH_LIST), take the first, and complete it. libvirtd refuses every other call on
 * an unauthenticated connection ("authentication required"), so this is the first thing a
 * connection says.
 *
 * Schemes: `none` needs nothing; `polkit` is one call (REMOTE_PROC_AUTH_POLKIT) in which libvirtd
 * checks the socket peer's uid — root is let in without asking polkitd, any other uid needs a
 * polkit rule for org.libvirt.unix.manage (org.libvirt.unix.monitor read-only). SASL is not
 * implemented: see README.md ("SASL") for why; it fails with a {@link LibvirtAuthError} that names
 * the scheme and the fix, before any domain call.
 */
import os from 'node:os';
import { ErrorCode, LibvirtAuthError, LibvirtError, type AuthScheme } from './errors';
import { AUTH_TYPE_LIST_MAX, AuthType, REMOTE_PROGRAM, RemoteProcedure } from './procedures';
import type { CallRequest } from './transport';
import { XdrReader } from './xdr';

/** The one thing authentication needs from a connection: send a call, get its reply payload. */
export type Call = (req: CallRequest) => Promise<Buffer>;

export interface AuthenticateOptions {
  /** For messages: the socket the connection went to. */
  socketPath: string;
  readOnly: boolean;
  timeoutMs: number;
  /** The uid libvirtd will see as the socket peer; default this process's. */
  uid?: number;
}

/**
 * REMOTE_PROC_AUTH_LIST, then the scheme it names first: nothing for `none`,
 * REMOTE_PROC_AUTH_POLKIT for `polkit`. Resolves with the scheme used; rejects with
 * {@link LibvirtAuthError} when libvirtd refuses or wants a scheme vmsnap does not speak.
 */
export async function authenticate(call: Call, opts: AuthenticateOptions): Promise<AuthScheme> {
  const types = await authList(call, opts.timeoutMs);
  // An empty list means an unauthenticated socket, as in libvirt's client.
  const first = types[0];
  if (first === undefined || first === AuthType.NONE) return 'none';
  if (first === AuthType.POLKIT) {
    await authPolkit(call, opts);
    return 'polkit';
  }
  throw unsupported(first === AuthType.SASL ? 'sasl' : `unknown (${first})`, opts);
}

/** REMOTE_PROC_AUTH_LIST: the schemes the socket accepts, preferred first. */
async function authList(call: Call, timeoutMs: number): Promise<number[]> {
  let reply: Buffer;
  try {
    reply = await call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.AUTH_LIST, timeoutMs });
  } catch (err) {
    // A libvirtd older than the procedure (VIR_ERR_NO_SUPPORT) has no authentication to do.
    if (err instanceof LibvirtError && err.code === ErrorCode.NO_SUPPORT) return [];
    throw err;
  }
  const r = new XdrReader(reply);
  const types = r.array((rr) => rr.int(), AUTH_TYPE_LIST_MAX);
  r.end();
  return types;
}

/** REMOTE_PROC_AUTH_POLKIT: libvirtd checks the peer uid; its reply (`complete`) carries nothing we act on. */
async function authPolkit(call: Call, opts: AuthenticateOptions): Promise<void> {
  try {
    await call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.AUTH_POLKIT, timeoutMs: opts.timeoutMs });
  } catch (err) {
    if (!(err instanceof LibvirtError)) throw err;
    throw polkitRefused(err, opts);
  }
}

function polkitRefused(err: LibvirtError, opts: AuthenticateOptions): LibvirtAuthError {
  const uid = opts.uid ?? process.getuid?.() ?? -1;
  const user = opts.uid === undefined ? os.userInfo().username : `uid ${uid}`;
  const action = opts.readOnly ? 'org.libvirt.unix.monitor' : 'org.libvirt.unix.manage';
  // libvirtd could not ask polkitd: AUTH_UNAVAILABLE, or (libvirt 9.0, measured) an internal error
  // "Unable to get system bus connection" when no D-Bus runs. Either may come back. Anything else
  // is polkit's answer for this uid, the same on every retry.
  const unavailable = err.code === ErrorCode.AUTH_UNAVAILABLE || /system bus/i.test(err.message);
  const fix = unavailable
    ? `start the system D-Bus and polkitd on this host and add a polkit rule for ${action}, or run vmsnap as root (libvirtd lets root in without asking polkit)`
    : `run vmsnap as root, or add a polkit rule that grants ${action} to uid ${uid} (e.g. /etc/polkit-1/rules.d/50-vmsnap.rules: ` +
      `polkit.addRule(function(a, s) { if (a.id == "${action}" && s.user == "${user}") return polkit.Result.YES; }))`;
  return new LibvirtAuthError(`libvirtd at ${opts.socketPath} refused polkit authentication for uid ${uid} (${action}): ${err.message}`, {
    scheme: 'polkit',
    socketPath: opts.socketPath,
    fix,
    retryable: unavailable,
    cause: err,
  });
}

function unsupported(scheme: AuthScheme, opts: AuthenticateOptions): LibvirtAuthError {
  const setting = opts.readOnly ? 'auth_unix_ro' : 'auth_unix_rw';
  return new LibvirtAuthError(`libvirtd at ${opts.socketPath} requires ${scheme} authentication (${setting} = "${scheme}"), which vmsnap does not implement`, {
    scheme,
    socketPath: opts.socketPath,
    fix:
      `set ${setting} = "polkit" (the Debian/EL default: root is let in) or "none" with unix_sock_group/unix_sock_rw_perms limiting who may open ` +
      `the socket, in libvirtd.conf (virtqemud.conf on modular daemons), and restart the daemon`,
    retryable: false,
  });
}
