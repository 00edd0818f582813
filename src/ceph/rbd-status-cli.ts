import { execFile } from 'node:child_process';
import { constants } from 'node:os';
import { RbdError } from './errors';
import type { OmapCliOptions } from './omap-cli';

/*
 * Who has an image open or locked, and its removal, through the `rbd` CLI: each call is its own
 * process with its own librados session, bounded and SIGKILLed at its deadline like the omap calls.
 * The addon has no watcher or locker listing, and these are asked rarely (a hand-off proving a
 * guest runs nowhere, the reaper before it removes a disk).
 */

export interface ImageLocation {
  pool: string;
  image: string;
  namespace?: string;
}

const { EBUSY, EIO, ENOENT, ENOTEMPTY, ETIMEDOUT } = constants.errno;

function specArgs(d: ImageLocation): string[] {
  return ['--pool', d.pool, ...(d.namespace ? ['--namespace', d.namespace] : []), '--image', d.image];
}

/** One bounded `rbd` CLI call (its own process and session, SIGKILLed at its deadline); every rbd CLI use goes through it. */
export function rbdCli(o: OmapCliOptions, args: string[], what: string): Promise<string> {
  const timeout = o.timeoutMs ?? 10_000;
  const argv: string[] = [];
  if (o.conf) argv.push('-c', o.conf);
  if (o.id) argv.push('--id', o.id);
  if (o.keyring) argv.push('--keyring', o.keyring);
  // Fail fast rather than wait client_mount_timeout (300 s) for a monitor.
  argv.push('--client-mount-timeout', String(Math.max(1, Math.ceil(timeout / 1000))), ...args);
  return new Promise((resolve, reject) => {
    execFile('rbd', argv, { timeout, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      if (err.killed || err.signal === 'SIGKILL') return reject(new RbdError(ETIMEDOUT, what));
      reject(new RbdError(errnoOf(stderr), what, { cause: new Error(stderr.trim() || err.message) }));
    });
  });
}

/** The errno rbd printed, or the one its words name (`rbd rm` says "still has watchers" with no number). */
function errnoOf(stderr: string): number {
  if (/image still has watchers|image has watchers/.test(stderr)) return EBUSY;
  if (/image has snapshots|has snapshots with linked clones|image has children/.test(stderr)) return ENOTEMPTY;
  const m = /: \((\d+)\) /.exec(stderr);
  return m ? Number(m[1]) : EIO;
}

/** `rbd status --format json`: the watchers of an image, i.e. the clients (a QEMU among them) that have it open. */
export async function imageWatchers(o: OmapCliOptions, d: ImageLocation): Promise<string[]> {
  const what = `rbd status ${d.pool}/${d.image}`;
  let out: string;
  try {
    out = await rbdCli(o, ['--format', 'json', 'status', ...specArgs(d)], what);
  } catch (err) {
    // A removed image has no watchers: nothing holds it open.
    if (err instanceof RbdError && err.errno === ENOENT) return [];
    throw err;
  }
  try {
    const v = JSON.parse(out) as { watchers?: { address?: string }[] };
    return (v.watchers ?? []).map((w) => w.address ?? '?');
  } catch (e) {
    throw new Error(`${what}: unreadable output (${String(e)})`, { cause: e });
  }
}

/**
 * `rbd lock ls --format json`: the holders of the image's header lock — the exclusive-lock owner
 * (id `auto <cookie>`, a QEMU that wrote to it, alive or dead) and any advisory locker. Opens the
 * image read-only: nothing is acquired, nothing broken.
 */
export async function imageLockers(o: OmapCliOptions, d: ImageLocation): Promise<string[]> {
  const what = `rbd lock ls ${d.pool}/${d.image}`;
  let out: string;
  try {
    out = await rbdCli(o, ['--format', 'json', 'lock', 'ls', ...specArgs(d)], what);
  } catch (err) {
    if (err instanceof RbdError && err.errno === ENOENT) return [];
    throw err;
  }
  try {
    const v = JSON.parse(out) as unknown;
    // Ceph 16 prints a list of {id, locker, address}; older releases an object keyed by lock id.
    const list = Array.isArray(v) ? (v as { locker?: string }[]) : Object.values((v ?? {}) as Record<string, { locker?: string }>);
    return list.map((l) => l.locker ?? '?');
  } catch (e) {
    throw new Error(`${what}: unreadable output (${String(e)})`, { cause: e });
  }
}

/**
 * `rbd rm` in its own process, SIGKILLed at its deadline (default 10 s). librbd's removal acquires
 * the exclusive lock first and would break the lock of an owner whose watch has expired (a dead
 * or long-stalled QEMU, ~30 s after it stopped answering): a caller that found no locker just
 * before, and whose removal is killed well inside those 30 s, can therefore never break one.
 * Resolves once removed (or already gone); rejects with the errno (ENOTEMPTY: snapshots or
 * clones; EBUSY: open or locked; ETIMEDOUT: killed at the bound).
 */
export async function removeImageCli(o: OmapCliOptions, d: ImageLocation): Promise<void> {
  try {
    await rbdCli(o, ['rm', '--no-progress', ...specArgs(d)], `rbd rm ${d.pool}/${d.image}`);
  } catch (err) {
    if (err instanceof RbdError && err.errno === ENOENT) return;
    throw err;
  }
}
