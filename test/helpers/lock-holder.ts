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

