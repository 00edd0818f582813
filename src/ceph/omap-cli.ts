import { execFile } from 'node:child_process';
import { constants } from 'node:os';
import type { ConnectOptions } from './cluster';
import { RbdError, isNotFound } from './errors';

/*
 * omap of one RADOS object through the `rados` CLI: each call is its own process with its own
 * librados session, killed (SIGKILL) at its deadline, so a hung monitor or OSD never holds a
 * worker thread or the worker's session. The addon has no object-class calls; an omap write
 * costs one process (~50 ms here), paid before the freeze, never inside it.
 */

export interface OmapTarget {
  pool: string;
  namespace?: string;
  object: string;
}

export interface OmapCliOptions extends ConnectOptions {
  /** Per call (default 10 s). */
  timeoutMs?: number;
}

const { EIO, ETIMEDOUT } = constants.errno;

function baseArgs(o: OmapCliOptions, t: OmapTarget): string[] {
  const a: string[] = [];
  if (o.conf) a.push('-c', o.conf);
  if (o.id) a.push('--id', o.id);
  if (o.keyring) a.push('--keyring', o.keyring);
  // Fail fast rather than wait client_mount_timeout (300 s) for a monitor.
  a.push('--client-mount-timeout', String(Math.max(1, Math.ceil((o.timeoutMs ?? 10_000) / 1000))));
  a.push('-p', t.pool);
  if (t.namespace) a.push('-N', t.namespace);
  return a;
}

function rados(o: OmapCliOptions, t: OmapTarget, args: string[]): Promise<string> {
  const timeout = o.timeoutMs ?? 10_000;
  const argv = [...baseArgs(o, t), ...args];
  return new Promise((resolve, reject) => {
    execFile('rados', argv, { timeout, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const call = `rados ${args[0]} ${t.pool}${t.namespace ? `/${t.namespace}` : ''}/${t.object}`;
      if (err.killed || err.signal === 'SIGKILL') return reject(new RbdError(ETIMEDOUT, call));
      // rados prints "error ...: (2) No such file or directory" and similar: keep the errno.
      const m = /\((\d+)\)/.exec(stderr);
      reject(new RbdError(m ? Number(m[1]) : EIO, call, { cause: new Error(stderr.trim() || err.message) }));
    });
  });
}

/** `rados setomapval`: creates the object when absent. */
export async function setOmapValue(o: OmapCliOptions, t: OmapTarget, key: string, value: string): Promise<void> {
  await rados(o, t, ['setomapval', t.object, key, value]);
}

/** `rados rmomapkey`; a missing object or key is already removed. */
export async function removeOmapKey(o: OmapCliOptions, t: OmapTarget, key: string): Promise<void> {
  try {
    await rados(o, t, ['rmomapkey', t.object, key]);
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
}

/** `rados listomapvals`: every key → value (as UTF-8); empty when the object is absent. */
export async function listOmapValues(o: OmapCliOptions, t: OmapTarget): Promise<Map<string, string>> {
  let out: string;
  try {
    out = await rados(o, t, ['listomapvals', t.object]);
  } catch (err) {
    if (isNotFound(err)) return new Map();
    throw err;
  }
  return parseListOmapVals(out);
}

/**
 * Output of `rados listomapvals` (Ceph 16 ignores --format for it): per key, the key on its own
 * line, `value (N bytes) :`, a hexdump of N bytes, the end offset, a blank line.
 */
export function parseListOmapVals(out: string): Map<string, string> {
  const m = new Map<string, string>();
  const lines = out.split('\n');
  let i = 0;
  while (i < lines.length) {
    const key = lines[i++];
    if (key === '') continue;
    const head = /^value \((\d+) bytes\) :$/.exec(lines[i] ?? '');
    if (!head) throw new Error(`rados listomapvals: unexpected line after key ${JSON.stringify(key)}: ${JSON.stringify(lines[i])}`);
    i++;
    const n = Number(head[1]);
    const bytes: number[] = [];
    while (bytes.length < n && i < lines.length) {
      const row = /^[0-9a-f]{8} {2}(.*?)\s*\|/.exec(lines[i++]);
      if (!row) throw new Error(`rados listomapvals: bad hexdump line for key ${JSON.stringify(key)}`);
      for (const h of row[1].trim().split(/\s+/)) if (h) bytes.push(parseInt(h, 16));
    }
    if (/^[0-9a-f]{8}$/.test(lines[i] ?? '')) i++; // the end offset
    m.set(key, Buffer.from(bytes).toString('utf8'));
  }
  return m;
}
