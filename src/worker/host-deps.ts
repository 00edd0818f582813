import { readRestoreKey } from '../host/restore-key';
import { LibvirtClient } from '../libvirt';
import { RadosCluster, SnapshotterPool } from '../ceph';
import type { RunScope } from '../model/identity';
import type { IoCtx } from '../ceph';
import type { ActivityDeps } from '../../activities';
import { readOnlyLibvirtUri } from '../config';
import type { Config } from '../config';
import { freezeGuardFor } from '../safety/guard-for';
import { Metrics } from '../host/metrics';
import { jsonLogger } from './logger';
import { SessionFence } from './fencing';
import type { Logger } from './logger';

export interface HostDeps extends ActivityDeps {
  fence: SessionFence;
  close(): Promise<void>;
}

/**
 * The host's long-lived connections: two libvirt connections (read-only for inspection,
 * read-write for the guest agent; both reconnect by themselves), one rados cluster handle with an
 * ioctx per pool, and the snapshotter processes (one per VM in flight). Opened lazily so a worker starts even while
 * libvirtd or Ceph is briefly away.
 */
export function createHostDeps(
  config: Config,
  metrics = new Metrics(),
  log: Logger = jsonLogger({ host: config.host }, process.stderr, { level: config.logLevel }),
  // The worker replaces the cluster with the namespace id (resolveScope) before any activity runs.
  scope: RunScope = { namespace: config.temporal.namespace, cluster: config.fleetId ?? 'unresolved' },
): HostDeps {
  const pools = new Map<string, Promise<IoCtx>>();
  const cephOpts = { conf: config.ceph.conf, id: config.ceph.id, keyring: config.ceph.keyring };
  // evictWith: a killed snapshotter's dead session is fenced at once, so a snapshot it left with a
  // hung lock owner appears (and is removed) promptly instead of ~30 s later.
  const fence = new SessionFence(config.stateDir);
  // A child per VM in flight (lanes): one VM's hung lock owner never kills another VM's call.
  const snapshotter = new SnapshotterPool({
    ...cephOpts,
    maxLanes: config.snapshotterLanes,
    evictWith: () => cluster(),
    onLaneChildReady: (slot, addrs) => void fence.record(`snapshotter-${slot}`, addrs).catch(() => undefined),
  });
  const radosCli = { ...cephOpts, timeoutMs: 10_000 };
  // Up to two watchdogs started ahead (at a run's inspect): ~16 MiB private each while up, 120 s at most.
  const guard = freezeGuardFor(config, (m, f) => log.error(m, f), 10_000, { standbys: Math.min(2, config.maxWindowsPerHost) });

  const libvirt = reopening(() => LibvirtClient.connect({ uri: config.libvirt.uri }));
  const libvirtReadOnly = reopening(() => LibvirtClient.connect({ uri: readOnlyLibvirtUri(config), readOnly: true }));
  const rados = reopening(() => RadosCluster.connect({ ...cephOpts, connectTimeoutSec: 10 }));
  const cluster = rados.get;
  const ioctx = (pool: string, namespace?: string) => {
    const key = `${pool}/${namespace ?? ''}`;
    let io = pools.get(key);
    if (!io) {
      io = cluster().then((c) => c.openIoCtx(pool, namespace));
      io.catch(() => pools.delete(key));
      pools.set(key, io);
    }
    return io;
  };
  const dr = config.drCeph ? drSite(config.drCeph) : undefined;

  return {
    host: config.host,
    limits: { windowsPerHost: config.maxWindowsPerHost, snapshotsPerCluster: config.maxSnapshotsPerCluster },
    libvirt: libvirt.get,
    libvirtReadOnly: libvirtReadOnly.get,
    libvirtStatusDir: config.libvirt.statusDir,
    rados: cluster,
    ioctx,
    snapshotter,
    ...(dr ? { dr } : {}),
    radosCli,
    restoreKey: () => readRestoreKey(config.restoreKeyFile),
    clockSkewMs: config.clockSkewMs,
    ...(config.preFlushTimeoutMs > 0 ? { preFlush: { command: config.preFlushCommand, timeoutMs: config.preFlushTimeoutMs } } : {}),
    memoryReserveMiB: config.memoryReserveMiB,
    scope,
    guard,
    metrics,
    log,
    fence,
    async close() {
      guard.close();
      await snapshotter.close();
      for (const io of pools.values()) await io.then((i) => i.close()).catch(() => undefined);
      await rados.opened()?.then((c) => c.shutdown()).catch(() => undefined);
      await dr?.close();
      for (const c of [libvirt, libvirtReadOnly]) await c.opened()?.then((x) => x.close()).catch(() => undefined);
    },
  };
}

/**
 * The DR site's cluster, connected on first use by a DR run. Its images are not live (rbd-mirror
 * writes them, nobody holds their lock for a guest): reading them from this session is safe.
 */
function drSite(c: NonNullable<Config['drCeph']>): NonNullable<ActivityDeps['dr']> & { close(): Promise<void> } {
  const rados = reopening(() => RadosCluster.connect({ conf: c.conf, id: c.id, keyring: c.keyring, connectTimeoutSec: 10 }));
  const pools = new Map<string, Promise<IoCtx>>();
  return {
    ioctx(pool, namespace) {
      const key = `${pool}/${namespace ?? ''}`;
      let io = pools.get(key);
      if (!io) {
        io = rados.get().then((r) => r.openIoCtx(pool, namespace));
        io.catch(() => pools.delete(key));
        pools.set(key, io);
      }
      return io;
    },
    fsid: () => rados.get().then((r) => r.fsid()),
    async close() {
      for (const io of pools.values()) await io.then((i) => i.close()).catch(() => undefined);
      await rados.opened()?.then((r) => r.shutdown()).catch(() => undefined);
    },
  };
}

/** Opens on first use and keeps what it opened; a failed open is forgotten, so the next use retries. */
function reopening<T>(open: () => Promise<T>): { get: () => Promise<T>; opened: () => Promise<T> | undefined } {
  let current: Promise<T> | undefined;
  return {
    get: () => {
      current ??= open().catch((err: unknown) => {
        current = undefined;
        throw err;
      });
      return current;
    },
    opened: () => current,
  };
}
