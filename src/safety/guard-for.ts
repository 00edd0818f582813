import type { Config } from '../config';
import { FreezeGuard } from './freeze-guard';
import type { JournalLogger } from './freeze-journal';
import { ObligationStore } from './obligation-store';

/**
 * The host's freeze guard as every process of vmsnap builds it — the worker, `vmsnap thaw`, the
 * arrival guard libvirt's hook starts — so all of them write and resolve the same journal and the
 * same cluster-wide obligations. `longLived`: the worker's (FreezeGuardOptions).
 */
export function freezeGuardFor(config: Config, log?: JournalLogger, radosTimeoutMs = 10_000, longLived?: { standbys: number }): FreezeGuard {
  const radosCli = { conf: config.ceph.conf, id: config.ceph.id, keyring: config.ceph.keyring, timeoutMs: radosTimeoutMs };
  return new FreezeGuard({
    libvirtUri: config.libvirt.uri,
    stateDir: config.stateDir,
    ...(log ? { log } : {}),
    obligations: new ObligationStore(radosCli, config.imagePool),
    obligationSource: { cli: radosCli, pool: config.imagePool },
    clockSkewMs: config.clockSkewMs,
    host: config.host,
    ...(longLived ? { longLived } : {}),
  });
}
