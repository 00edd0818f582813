import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../../src/config';
import type { Config } from '../../src/config';
import { createHostWorker } from '../../src/worker/run-worker';
import type { HostWorker } from '../../src/worker/run-worker';
import { jsonLogger } from '../../src/worker/logger';
import { labHypervisor, labVars, need } from '../../support/lab/env';

export interface Harness {
  vars: Record<string, string>;
  config: Config;
  client: Client;
  hw: HostWorker;
  logs: string[];
  /** Runs the worker in the background until stop(); `retire: false` stops it as a restart does (draining). */
  stop(opts?: { retire?: boolean }): Promise<void>;
}

/**
 * A real host worker against the lab: real Temporal, libvirtd, guests and Ceph. Each test file
 * gets its own host id, so its own task queue and state dir; the Ceph key is the restricted
 * `client.vmsnap` (profile rbd on vms and images only), as production should run.
 */
export async function startHarness(
  opts: {
    host?: string;
    /** Which lab hypervisor host's libvirtd the worker talks to (default: host A). */
    labHost?: 'a' | 'b';
    cephId?: string;
    keyring?: string;
    /** Another Temporal than the lab's (a dev server started without vmsnap's search attributes). */
    temporalAddress?: string;
    config?: Partial<Pick<Config, 'drCeph' | 'restoreKeyFile' | 'reapIntervalMs' | 'ownerRecordHorizonMs' | 'fleetBeatMs' | 'maxWindowsPerHost' | 'maxSnapshotsPerCluster' | 'keepReplacedMs' | 'metricsPort' | 'preFlushTimeoutMs' | 'preFlushCommand'>>;
  } = {},
): Promise<Harness> {
  const vars = labVars();
  const host = opts.host ?? `lab-${randomUUID().slice(0, 8)}`;
  const libvirt = labHypervisor(vars, opts.labHost ?? 'a');
  const config = loadConfig(
    {
      temporal: { address: opts.temporalAddress ?? need(vars, 'TEMPORAL_ADDRESS'), namespace: vars.TEMPORAL_NAMESPACE ?? 'default' },
      libvirt: { uri: libvirt.uri, statusDir: libvirt.statusDir },
      ceph: {
        conf: need(vars, 'CEPH_CONF'),
        id: opts.cephId ?? vars.CEPH_VMSNAP_ID ?? 'admin',
        keyring: opts.keyring ?? vars.CEPH_VMSNAP_KEYRING ?? vars.CEPH_KEYRING,
      },
      host,
      stateDir: mkdtempSync(path.join(os.tmpdir(), 'vmsnap-state-')),
      // The lab's one restore key, as every host of a fleet has the same file.
      ...(vars.VMSNAP_RESTORE_KEY_FILE ? { restoreKeyFile: vars.VMSNAP_RESTORE_KEY_FILE } : {}),
      metricsPort: 0,
      ...opts.config,
    },
    {},
    undefined,
  );
  const logs: string[] = [];
  const sink = { write: (s: string) => (logs.push(s), true) } as unknown as NodeJS.WritableStream;
  const hw = await createHostWorker(config, jsonLogger({ host }, sink));
  const running = hw.run();
  const client = new Client({ connection: await Connection.connect({ address: config.temporal.address }), namespace: config.temporal.namespace });
  return {
    vars,
    config,
    client,
    hw,
    logs,
    async stop({ retire = true } = {}) {
      // A test's host is gone for good when its file ends: drained, it would leave every later
      // file's "not running anywhere" unsure for 3x its loss threshold.
      hw.shutdown({ retire });
      await running;
      await client.connection.close();
    },
  };
}

export function uniqueId(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}
