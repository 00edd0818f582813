import http from 'node:http';
import type { Worker } from '@temporalio/worker';
import type { Metrics } from '../host/metrics';

/**
 * How long a scrape waits for what it reads on the way (the fleet registry, the freeze journal,
 * the SDK's own metrics): well inside Prometheus's default 10 s scrape timeout, so a Temporal
 * outage costs the scrape its fleet series, never the worker's own.
 */
export const SCRAPE_READ_TIMEOUT_MS = 2_000;

/**
 * `/healthz` and `/metrics` of a host worker (vmsnap's series and the process's, then the SDK's
 * from `sdkPort`). `workers` are read at each request: during start-up there are none yet, and
 * /healthz says STARTING while /metrics already serves what the worker has.
 */
export function metricsEndpoint(
  workers: () => Pick<Worker, 'getState'>[],
  metrics: Metrics,
  sdkPort: number,
  readTimeoutMs = SCRAPE_READ_TIMEOUT_MS,
): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> {
  return async (req, res) => {
    if (req.url === '/healthz') {
      const [state = 'STARTING', bulk = 'STARTING'] = workers().map((w) => w.getState());
      res.writeHead(state === 'RUNNING' && bulk === 'RUNNING' ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ state, bulk }));
      return;
    }
    if (req.url === '/metrics') {
      const sdk = sdkPort
        ? fetch(`http://127.0.0.1:${sdkPort}/metrics`, { signal: AbortSignal.timeout(readTimeoutMs) }).then((r) => (r.ok ? r.text() : ''), () => '')
        : Promise.resolve('');
      try {
        await metrics.collect(readTimeoutMs);
        const text = await metrics.render();
        res.writeHead(200, { 'content-type': metrics.contentType });
        res.end(text + '\n' + (await sdk));
      } catch (err) {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics unavailable: ${String(err)}\n`);
      }
      return;
    }
    res.writeHead(404).end();
  };
}

/** Where the endpoint listens: `address` may be a hostname or an IPv4/IPv6 literal. */
export function metricsUrl(address: string, port: number): string {
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}/metrics`;
}

/**
 * The endpoint's server, listening on `address:port`. Rejects (EADDRINUSE, EADDRNOTAVAIL…) with a
 * message naming the address, so a worker that cannot serve its metrics says why.
 */
export function serveMetrics(handler: ReturnType<typeof metricsEndpoint>, address: string, port: number): { server: http.Server; listening: Promise<void> } {
  const server = http.createServer((req, res) => void handler(req, res));
  const listening = new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`cannot serve /metrics on ${address}:${port}: ${err.message}`, { cause: err })));
    server.listen(port, address, () => resolve());
  });
  return { server, listening };
}
