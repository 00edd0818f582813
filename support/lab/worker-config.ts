import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import type { Config } from '../../src/config';
import type { LabEnv, LabLibvirtEnv } from './env';

/**
 * A host worker's config against the lab: its Temporal, libvirtd and Ceph with the restricted
 * `client.vmsnap` key, a host id of its own and a fresh state dir; no metrics port. `env` may
 * still set the rest (e.g. VMSNAP_BULK_CONCURRENCY). `libvirt`: which lab host's libvirtd
 * (default host A's; `lab.hosts.b.libvirt` for host B).
 */
export function labWorkerConfig(lab: LabEnv, host: string, env: NodeJS.ProcessEnv = {}, libvirt: LabLibvirtEnv = lab.libvirt!): Config {
  return loadConfig(
    {
      temporal: { address: lab.temporal.address, namespace: lab.temporal.namespace },
      libvirt: { uri: libvirt.uri, statusDir: libvirt.statusDir },
      ceph: { conf: lab.ceph.conf, id: lab.ceph.vmsnapId, keyring: lab.ceph.vmsnapKeyring },
      host,
      stateDir: mkdtempSync(path.join(os.tmpdir(), `vmsnap-${host}-`)),
      metricsPort: 0,
    },
    env,
    undefined,
  );
}
