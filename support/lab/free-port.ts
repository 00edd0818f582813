import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (the kernel's pick), for a server started next. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, '127.0.0.1', resolve);
  });
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function isFree(port: number): Promise<boolean> {
  const s = createServer();
  const ok = await new Promise<boolean>((resolve) => {
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (ok) await new Promise((r) => s.close(r));
  return ok;
}

/**
 * A port N free on 127.0.0.1 with N+1 free too: a worker's /metrics port, whose Temporal SDK
 * exporter takes the next one (src/worker/run-worker.ts).
 */
export async function freePortPair(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await freePort();
    if (port < 65535 && (await isFree(port + 1))) return port;
  }
  throw new Error('no two consecutive free ports on 127.0.0.1 in 50 tries');
}
