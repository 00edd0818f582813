import type { LibvirtClient } from '../src/libvirt';
import type { IoCtx, OmapCliOptions, RadosCluster, SnapshotterPool } from '../src/ceph';
import type { RunScope } from '../src/model/identity';
import type { FleetHost } from '../src/model/fleet';
import type { FleetLimits } from '../src/model/types';
import type { FreezeGuard } from '../src/safety/freeze-guard';
import type { Metrics } from '../src/host/metrics';
import type { Logger } from '../src/worker/logger';
import type { RestoreKey } from '../src/host/restore-key';
import type { PreFlushSettings } from '../src/model/pre-flush';

/** What the activities need from the host. Real adapters in the worker; tests pass the same kinds. */
export interface ActivityDeps {
  /** Host id (task queue suffix) recorded in results. */
  host: string;
  /** Fleet limits this host's runs hold through Temporal (config maxWindowsPerHost, maxSnapshotsPerCluster). */
  limits?: FleetLimits;
  /** Read-write: freeze, thaw and every guest-agent command (libvirt refuses them read-only, error 29). */
  libvirt(): Promise<LibvirtClient>;
  /** Read-only (libvirtd's `-ro` socket): lookups, domain state and XML. */
  libvirtReadOnly(): Promise<LibvirtClient>;
  /** libvirtd's QEMU status dir, where a domain's agent timeout can be read (config libvirt.statusDir). */
  libvirtStatusDir: string;
  rados(): Promise<RadosCluster>;
  ioctx(pool: string, namespace?: string): Promise<IoCtx>;
  /**
   * The DR site's cluster (config drCeph), read only: an ioctx of its pool (the mirrored pool's
   * name) and its fsid. Absent when the host has none: DR runs are refused.
   */
  dr?: { ioctx(pool: string, namespace?: string): Promise<IoCtx>; fsid(): Promise<string> };
  /** Every librbd call on a live source image goes here: bounded, in a child process per VM. */
  snapshotter: SnapshotterPool;
  /** The `rados` CLI's connection options: owner records (omap), bounded per call. */
  radosCli: OmapCliOptions;
  /** This worker's Temporal namespace and fleet: recorded on everything it makes, matched before removal. */
  scope: RunScope;
  guard: FreezeGuard;
  /** Before each freeze, the guest is asked to write back its dirty data (config preFlush*); absent: off. */
  preFlush?: PreFlushSettings;
  /** How far two hosts' wall clocks may disagree (config clockSkewMs): a travelled freeze's deadline is judged with it. */
  clockSkewMs?: number;
  /** config memoryReserveMiB: what a new VM placed here must leave free. */
  memoryReserveMiB?: number;
  metrics: Metrics;
  log: Logger;
  /** The fleet's restore-record key (config restoreKeyFile), read on each use; absent: records are written unsigned and `restore --as` refuses. */
  restoreKey?(): Promise<RestoreKey>;
  /** The fleet index and run control (Temporal client); set once the worker is connected. */
  fleet?: {
    /** Every host (O(hosts)). */
    hosts(): Promise<FleetHost[]>;
    /** One host's last beat (its entry). */
    host(host: string): Promise<FleetHost | undefined>;
    /** The few hosts a placement of `domain` asks (src/worker/fleet-index.ts). */
    candidates(domain: string): Promise<{ hosts: FleetHost[]; silent: string[]; live?: number }>;
    terminate(workflowId: string, reason: string): Promise<void>;
  };
  /** Lets long activities report progress to their workflow (signals); optional in tests. */
  reportProgress?(workflowId: string, progress: unknown): Promise<void>;
}
