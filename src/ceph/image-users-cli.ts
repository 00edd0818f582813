import { execFile } from 'node:child_process';
import { constants } from 'node:os';
import type { ConnectOptions } from './cluster';
import { RbdError } from './errors';

/*
 * Who has an image open, through the `rbd` CLI (the addon has no rbd_watchers_list or
 * rbd_lock_get_owners): `rbd status` lists the header's watchers (every client with the image
 * open read-write, a running VM's qemu included) and `rbd lock ls` the lock holders (the
 * exclusive-lock owner among them). Each call is its own process, opens the image read-only (no
 * watch of its own, no lock taken or broken) and is SIGKILLed at its deadline: a reaper asking
 * about a live image is never held by it.
 */

export interface ImageUsers {
  /** Watcher addresses (`rbd status`). */
  watchers: string[];
  /** Lock holders (`rbd lock ls`): the exclusive-lock owner, advisory lockers. */
  lockers: string[];
}

export interface ImageUsersOptions extends ConnectOptions {
  /** Per call (default 10 s). */
  timeoutMs?: number;
}

/** Watchers and lock holders of `spec` (`pool/image` or `pool/namespace/image`). */
export async function imageUsers(o: ImageUsersOptions, spec: string): Promise<ImageUsers> {
  const status = JSON.parse(await rbd(o, ['status', '--format', 'json', spec])) as { watchers?: { address?: string; client?: unknown }[] };
  const locks = JSON.parse(await rbd(o, ['lock', 'ls', '--format', 'json', spec])) as unknown;
  // Ceph 16 prints a list of {id, locker, address}; older releases an object keyed by lock id.
  const lockList = Array.isArray(locks) ? (locks as { locker?: string; id?: string }[]) : Object.values((locks ?? {}) as Record<string, { locker?: string }>);
  return {
    watchers: (status.watchers ?? []).map((w) => w.address ?? String(w.client ?? '?')),
    lockers: lockList.map((l) => l.locker ?? '?'),
  };
}

function rbd(o: ImageUsersOptions, args: string[]): Promise<string> {
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
      const call = `rbd ${args.slice(0, args[0] === 'lock' ? 2 : 1).join(' ')} ${args[args.length - 1]}`;
      if (err.killed || err.signal === 'SIGKILL') return reject(new RbdError(constants.errno.ETIMEDOUT, call));
      const m = /\((\d+)\)/.exec(stderr);
      reject(new RbdError(m ? Number(m[1]) : constants.errno.EIO, call, { cause: new Error(stderr.trim() || err.message) }));
    });
  });
}
