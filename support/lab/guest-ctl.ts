/**
 * Host side of the lab guests' control channel: a virtio-serial port `org.vmsnap.ctl.0` that QEMU
 * exposes as a unix socket (`$VMSNAP_PROBE_DIR/<guest>/ctl.sock`), read inside the guest by a
 * busybox loop (`lab/guest/ctl`). It reaches the guest without the QEMU guest agent, so a test
 * can hang the agent and still talk to the guest.
 *
 * Wire format, one line each way: `<id> <command> [arg]` → `<id> ok|err <detail>`. Replies with
 * another id are stale answers to an earlier client that gave up, and are skipped.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';

export type GuestCtlCommand =
  | { command: 'ping' }
  | { command: 'status' }
  /** `kill -STOP` qemu-ga: agent calls then block (freeze/thaw block forever by default). */
  | { command: 'hang-agent' }
  /** `kill -CONT` qemu-ga. */
  | { command: 'resume-agent' }
  /** The fsfreeze hook sleeps this many seconds before freezing; 0 turns it off. */
  | { command: 'slow-freeze'; seconds: number }
  | { command: 'probe-start' }
  | { command: 'probe-stop' };

export interface GuestCtlReply {
  ok: boolean;
  detail: string;
}

export class GuestCtlError extends Error {
  override name = 'GuestCtlError';
}

/** Path of a guest's control socket under the probe directory (`VMSNAP_PROBE_DIR`). */
export function ctlSocketPath(probeDir: string, guest: string): string {
  return join(probeDir, guest, 'ctl.sock');
}

function requestLine(id: string, req: GuestCtlCommand): string {
  if (req.command === 'slow-freeze') {
    if (!Number.isInteger(req.seconds) || req.seconds < 0) {
      throw new GuestCtlError(`slow-freeze needs whole seconds >= 0, got ${req.seconds}`);
    }
    return `${id} slow-freeze ${req.seconds}\n`;
  }
  return `${id} ${req.command}\n`;
}

/** Sends one command to the guest and waits for its reply (the guest polls its port every 0.2 s). */
export function guestCtl(
  socketPath: string,
  req: GuestCtlCommand,
  timeoutMs = 15_000,
): Promise<GuestCtlReply> {
  const id = randomBytes(6).toString('hex');
  const line = requestLine(id, req);
  return new Promise((resolve, reject) => {
    const sock = createConnection(socketPath);
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new GuestCtlError(`no reply to "${line.trim()}" on ${socketPath} within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(line));
    sock.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const reply = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        const m = /^(\S+) (ok|err)\s?(.*)$/.exec(reply);
        if (m && m[1] === id) {
          clearTimeout(timer);
          sock.end();
          resolve({ ok: m[2] === 'ok', detail: m[3] ?? '' });
          return;
        }
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(new GuestCtlError(`control socket ${socketPath}: ${err.message}`));
    });
  });
}

/** `guestCtl` that throws when the guest answers `err`. */
export async function guestCtlOk(
  socketPath: string,
  req: GuestCtlCommand,
  timeoutMs?: number,
): Promise<string> {
  const reply = await guestCtl(socketPath, req, timeoutMs);
  if (!reply.ok) throw new GuestCtlError(`${req.command}: ${reply.detail}`);
  return reply.detail;
}

const USAGE =
  'usage: guest-ctl <socket> ping|status|hang-agent|resume-agent|slow-freeze <seconds>|probe-start|probe-stop';

/** CLI used by lab/guest-ctl.sh: argv = [socket, command, arg?]. Exit 0 ok, 1 err, 2 no reply. */
export async function main(argv: string[]): Promise<number> {
  const [socketPath, command, arg] = argv;
  let req: GuestCtlCommand;
  switch (command) {
    case 'ping':
    case 'status':
    case 'hang-agent':
    case 'resume-agent':
    case 'probe-start':
    case 'probe-stop':
      req = { command };
      break;
    case 'slow-freeze':
      req = { command, seconds: arg !== undefined && /^\d+$/.test(arg) ? Number(arg) : NaN };
      break;
    default:
      process.stderr.write(`${USAGE}\n`);
      return 2;
  }
  if (!socketPath) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  try {
    const reply = await guestCtl(socketPath, req);
    (reply.ok ? process.stdout : process.stderr).write(`${reply.ok ? 'ok' : 'err'} ${reply.detail}\n`);
    return reply.ok ? 0 : 1;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(2);
    },
  );
}

/**
 * The pid of this lab's QEMU for `guest`, from libvirt's pid file. Never look it up by process
 * name: other labs on the machine run guests of the same name (network namespaces do not
 * separate pids), and a SIGSTOP must hit only this lab's.
 */
export function labQemuPid(libvirtLabDir: string, guest: string): number {
  const pid = Number(readFileSync(join(libvirtLabDir, 'run', 'qemu', `${guest}.pid`), 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 1) throw new Error(`no QEMU pid for ${guest} in ${libvirtLabDir}`);
  return pid;
}
