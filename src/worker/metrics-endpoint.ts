import type http from 'node:http';
import type { Worker } from '@temporalio/worker';
import type { Metrics } from '../host/metrics';

/**
 * How long a scrape waits for what it reads on the way (the fleet registry, the SDK's own
 * metrics): well inside Prometheus's default 10 s scrape timeout, so a Temporal outage costs the
 * scrape its fleet series, never the worker's own.
 */
export const SCRAPE_READ_TIMEOUT_MS = 2_000;

/** `/healthz` and `/metrics` of a host worker (vmsnap's series, then the SDK's from `sdkPort`). */
export function metricsEndpoint(
  workers: Pick<Worker, 'getState'>[],
  metrics: Metrics,
  sdkPort: number,
  readTimeoutMs = SCRAPE_READ_TIMEOUT_MS,
): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> {
  return async (req, res) => {
    if (req.url === '/healthz') {
      const [state, bulk] = workers.map((w) => w.getState());
      res.writeHead(state === 'RUNNING' && bulk === 'RUNNING' ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ state, bulk }));
      return;
    }
    if (req.url === '/metrics') {
      const sdk = sdkPort
        ? fetch(`http://127.0.0.1:${sdkPort}/metrics`, { signal: AbortSignal.timeout(readTimeoutMs) }).then((r) => r.text()).catch(() => '')
        : Promise.resolve('');
      await metrics.collect(readTimeoutMs);
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(metrics.render() + (await sdk));
      return;
    }
    res.writeHead(404).end();
  };
}
