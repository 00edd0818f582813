import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (the kernel's pick), for a server a test starts next. */
export async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}
