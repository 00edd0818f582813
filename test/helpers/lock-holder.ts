import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { IoCtx } from '../../src/ceph';
import { addonPath } from '../../src/ceph/native';
import { cliArgs, type CephTestEnv } from '../../support/ceph';

/**
 * Stands in for a VM's qemu: opens the image read-write and writes, which takes the exclusive
 * lock, then writes again on request. Plain JS over the addon, run as its own process.
 */
const HOLDER_JS = `
const a = require(process.env.ADDON);
const [conf, id, keyring, pool, ns, image] = JSON.parse(process.env.HOLDER);
(async () => {
  const c = await a.connect(conf, id, keyring, 10);
  const io = await a.ioctxCreate(c, pool, ns);
  const img = await a.openImage(io, image, null, false);
  await a.write(img, 0, Buffer.alloc(4096, 1));
  process.send({ type: 'ready', addrs: await a.getAddrs(c) });
  let n = 0;
  process.on('message', async (m) => {
    if (m === 'close') {
      await a.closeImage(img); await a.ioctxDestroy(io); await a.shutdown(c);
      process.exit(0);
    }
    const t0 = Date.now();
    try {
      await a.write(img, 4096 * ++n, Buffer.alloc(4096, 2));
      process.send({ type: 'write', ok: true, ms: Date.now() - t0 });
    } catch (e) {
      process.send({ type: 'write', ok: false, error: e.message, ms: Date.now() - t0 });
    }
  });
})().catch((e) => { console.error('holder failed', e); process.exit(1); });
`;

export type WriteResult = { type: 'write'; ok: boolean; ms: number; error?: string };

export function startHolder(dir: string, e: CephTestEnv, io: IoCtx, image: string): Promise<{ proc: ChildProcess; addrs: string }> {
  const file = path.join(dir, 'holder.cjs');
  writeFileSync(file, HOLDER_JS);
  const proc = fork(file, [], {
    env: { ...process.env, ADDON: addonPath(), HOLDER: JSON.stringify([e.conf, e.id, e.keyring ?? null, io.pool, io.namespace, image]) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    proc.once('message', (m: { addrs: string }) => resolve({ proc, addrs: m.addrs }));
    proc.once('exit', (code) => reject(new Error(`holder exited ${code}`)));
  });
}

/** Lets the holder release its lock and exit (SIGKILL after 5 s). */
export async function stopHolder(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill('SIGCONT');
  const exited = new Promise((r) => proc.once('exit', r));
  proc.send('close');
  const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}

export function holderWrite(proc: ChildProcess, timeoutMs: number): Promise<WriteResult | 'timeout'> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve('timeout'), timeoutMs);
    proc.once('message', (m: WriteResult) => { clearTimeout(t); resolve(m); });
    proc.send('write');
  });
}

/** Blocklisted client addresses (`ceph osd blocklist ls`: one "addr until" line each on stdout). */
export function blocklist(e: CephTestEnv): string[] {
  const out = execFileSync('ceph', [...cliArgs(e), 'osd', 'blocklist', 'ls'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return out.split('\n').map((l) => l.trim().split(/\s+/)[0]!).filter((a) => a && a.includes(':')).sort();
}


/**
 * A client that took the image's exclusive lock and died (SIGKILL) without releasing it, waited
 * until its watch has expired (osd_client_watch_timeout, 30 s): the lock stays, nobody watches.
 * Returns `rbd lock ls` as it then is (the dead owner's entry).
 */
export async function deadLockOwner(
  dir: string,
  e: CephTestEnv,
  io: IoCtx,
  image: string,
  rbd: (...args: string[]) => Promise<string>,
): Promise<{ id: string; locker: string; address: string }[]> {
  const spec = io.namespace ? `${io.pool}/${io.namespace}/${image}` : `${io.pool}/${image}`;
  const { proc } = await startHolder(dir, e, io, image);
  const lockers = JSON.parse(await rbd('lock', 'ls', '--format', 'json', spec)) as { id: string; locker: string; address: string }[];
  if (lockers.length !== 1) throw new Error(`the holder of ${spec} took no lock: ${JSON.stringify(lockers)}`);
  proc.kill('SIGKILL');
  const t0 = Date.now();
  for (;;) {
    const st = JSON.parse(await rbd('status', '--format', 'json', spec)) as { watchers: unknown[] };
    if (!st.watchers.length) return lockers;
    if (Date.now() - t0 > 90_000) throw new Error(`the dead holder’s watch on ${spec} did not expire in 90 s`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}
