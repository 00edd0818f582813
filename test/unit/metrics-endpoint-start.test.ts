import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import type { ConfigOverrides } from '../../src/config';
import { jsonLogger } from '../../src/worker/logger';
import { createHostWorker } from '../../src/worker/run-worker';
import { parseExposition, sample } from '../helpers/exposition';
import { freePort } from '../helpers/free-port';
import { until } from '../helpers/until';

/*
 * The worker's /metrics comes up first at start, before Ceph and Temporal answer (they may take
 * long, or never come): a host whose worker is stuck there shows as such on its dashboard instead
 * of as a scrape target that is down.
 */

/** A worker whose Ceph and Temporal are nowhere. */
function config(port: number, more: ConfigOverrides = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-start-'));
  return loadConfig(
    {
      temporal: { address: '127.0.0.1:1' },
      libvirt: { uri: `qemu:///system?socket=${dir}/no-libvirt-sock`, statusDir: dir },
      ceph: { conf: path.join(dir, 'no-ceph.conf') },
      host: `unit-start-${port}`,
      stateDir: path.join(dir, 'state'),
      metricsPort: port,
      ...more,
    },
    {},
    undefined,
  );
}

const quiet = () => jsonLogger({}, { write: () => true } as unknown as NodeJS.WritableStream);

describe('the metrics endpoint at start-up', () => {
  it('serves /metrics while Ceph and Temporal are still unreachable, with their up-gauges at 0; /healthz says STARTING', async () => {
    const port = await freePort();
    const starting = new AbortController();
    const worker = createHostWorker(config(port), quiet(), { signal: starting.signal });
    worker.catch(() => undefined);
    try {
      const text = await until('/metrics during start-up', () => fetch(`http://127.0.0.1:${port}/metrics`).then((r) => (r.ok ? r.text() : undefined)), 15_000);
      expect(sample(text, 'vmsnap_ceph_up')).toBe(0);
      expect(sample(text, 'vmsnap_temporal_up')).toBe(0);
      expect(sample(text, 'vmsnap_guests_frozen')).toBe(0);
      expect(text).toMatch(/^vmsnap_build_info\{version="[^"]+",node="v\d+[^"]*"\} 1$/m);
      expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
      parseExposition(text);
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(503);
      expect(await health.json()).toEqual({ state: 'STARTING', bulk: 'STARTING' });
    } finally {
      starting.abort();
      await worker.catch(() => undefined);
    }
    // Stopped with the start: the port is free again.
    await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
  }, 30_000);

  it('a port already taken fails the start, naming the address', async () => {
    const taken = http.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    try {
      await expect(createHostWorker(config(port, { metricsAddress: '127.0.0.1' }), quiet())).rejects.toThrow(`cannot serve /metrics on 127.0.0.1:${port}`);
    } finally {
      taken.close();
    }
  }, 30_000);
});
