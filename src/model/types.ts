/** Data exchanged between the workflow and its activities. Plain JSON: it is recorded in history. */
import type { RetentionResult } from './retention';
import type { Verification } from './verification';
import type { PreFlushOutcome, PreFlushResult } from './pre-flush';

export interface RbdLocation {
  pool: string;
  namespace?: string;
  image: string;
}

export interface InspectedDisk {
  target: string;
  rbd?: RbdLocation;
  /** Why the disk cannot be snapshotted by vmsnap, when rbd is absent. */
  unsupported?: string;
}

export interface InspectRequest {
  domain: string;
  quiesce: 'require' | 'prefer' | 'skip';
  agentTimeoutSec: number;
  /** Target image pool to check, or undefined in snapshot-only mode. */
  targetPool?: string;
  /**
   * DR mode: the RBD disks among `disks` (default all) must mirror in snapshot mode, primary here,
   * and the DR site must be reachable.
   */
  mirror?: { disks?: string[] };
}

export interface InspectResult {
  domain: { name: string; uuid: string };
  host: string;
  /** Cluster fsid of the source images' cluster, for rbd:// locations. */
  fsid: string;
  disks: InspectedDisk[];
  agent: { configured: boolean; responding: boolean; error?: string };
  /** The host's fleet limits (worker config), recorded here so the workflow reads them deterministically. */
  limits?: FleetLimits;
}

/** Caps on concurrent freeze windows: per hypervisor host, and per Ceph cluster (snapshot storms cost monitor proposals). */
export interface FleetLimits {
  windowsPerHost: number;
  snapshotsPerCluster: number;
}

/** One disk's plan: every name the run will create, derived from the workflow id. */
export interface DiskPlan {
  target: string;
  source: RbdLocation;
  /** Temporary (or, in snapshot-only mode, kept) snapshot on the source image. */
  sourceSnap: string;
  /** Flattened copy in the image pool, absent in snapshot-only mode. */
  image?: RbdLocation;
}

export interface SnapshotPlan {
  runKey: string;
  domain: { name: string; uuid: string };
  disks: DiskPlan[];
  skipped: { target: string; reason: string }[];
  freeze: boolean;
  /** Why the run will not be quiesced, when freeze is false. */
  noFreezeReason?: string;
  clone: boolean;
}

export { META } from './metadata-keys';

export interface FreezeRequest {
  domainUuid: string;
  domainName: string;
  agentTimeoutSec: number;
  deadlineMs: number;
  owner: string;
  /** The guest's RBD disks, recorded in the freeze's obligation (absent in histories from before it). */
  disks?: { pool: string; image: string; namespace?: string }[];
}

export interface FreezeResult {
  frozenFilesystems: number;
  /** Worker clock, ms since epoch, sub-ms precision. */
  startedAt: number;
  returnedAt: number;
  /** CLOCK_MONOTONIC ms (absent in histories recorded before it existed): the deadline's clock. */
  startedMono?: number;
  returnedMono?: number;
  /** The freeze's obligation id (src/model/freeze-obligation.ts): what a hand-off resolves. */
  freezeId?: string;
  /** The pre-flush before this freeze (outside its window), when the worker runs one. */
  preFlush?: PreFlushResult;
  /** The activity's work before the call (stand-down check, pre-flush, arming the guard), ms: a step outside the window. */
  preparedMs?: number;
}

export interface SnapshotDisksRequest {
  snaps: { target: string; source: RbdLocation; snap: string }[];
  timeoutMs: number;
}

export interface SnapshotDisksResult {
  /** The whole batch: first request sent → last reply (the disks are snapshotted in parallel). */
  startedAt: number;
  returnedAt: number;
  startedMono?: number;
  returnedMono?: number;
  /**
   * Per disk target: its own request → reply, measured in the snapshotter's parent. Histories
   * recorded before it was measured hold the batch time for every disk.
   */
  perDiskMs: Record<string, number>;
}

/** DR mode, after the thaw: carry each disk's snapshot of the run to the DR site (docs/dr.md). */
export interface MirrorRequest {
  /** Each disk's source image and the run's snapshot of it, taken in the window. */
  disks: { target: string; source: RbdLocation; snap: string }[];
  /** The point in time: the freeze call's start (the snapshot's when unfrozen), worker wall ms. */
  pointAt: number;
  /** Bound on the mirror snapshots (through the VM's lock owner, like a snapshot). */
  snapshotTimeoutMs: number;
  /** Bound on the wait for the DR site's copies. */
  waitMs: number;
  /**
   * What `vmsnap dr-restore` needs, written on each disk's image before the mirror snapshots
   * (src/model/dr-point.ts), which carry it to the DR site. Absent in histories from before it.
   */
  record?: { workflowId: string; runId: string; domain: { name: string; uuid: string }; quiesced: boolean };
}

/** DR mode: the run's snapshots as the DR site has them. */
export interface MirrorResult {
  /** The DR cluster's fsid. */
  site: string;
  /**
   * Replication lag of this run's point: its pointAt to the look that saw every disk's snapshot on
   * the DR site, carried by a complete mirror snapshot.
   */
  rpoMs: number;
  /** From the mirror snapshots' request (after the thaw) to that look. */
  waitedMs: number;
  disks: {
    target: string;
    /** The run's snapshot, under the same name on the DR site's copy of the image. */
    snapshot: string;
    /** This run's mirror snapshot (its id here). */
    mirrorSnapId: number;
    /**
     * The mirror snapshot whose complete copy carried the run's snapshot there: this run's, or a
     * later one (another mirror snapshot of the image taken meanwhile); its id here and there.
     */
    carriedBy: number;
    drMirrorSnapId: number;
    copiedAfterMs: number;
  }[];
}

export interface ThawRequest {
  domainUuid: string;
  domainName: string;
  agentTimeoutSec: number;
  thawedBy: ThawLayer;
  /** `<workflowId>/<runId>`: names the late-freeze watch in the journal. */
  owner?: string;
  /**
   * The freeze's outcome is unknown (its call failed or was abandoned): after the proven thaw,
   * keep watching guest-fsfreeze-status this long and thaw a freeze that lands late.
   */
  lateFreezeWatchMs?: number;
  /** A hand-off's thaw: the freeze whose obligation a proven thaw resolves. */
  freezeId?: string;
}

export type ThawLayer = 'workflow' | 'compensation' | 'guard' | 'reconcile' | 'sweeper' | 'operator' | 'handoff' | 'arrival';

export interface ThawResult {
  /** Filesystems thawed by this call (0 when the guest was already thawed). */
  thawedFilesystems: number;
  startedAt: number;
  returnedAt: number;
  startedMono?: number;
  returnedMono?: number;
  /**
   * When the guest was thawed (wall ms, as startedAt): the thaw call's return, before the
   * guest-fsfreeze-status that proves it. The freeze window ends here; histories from before it
   * was recorded end the window at returnedAt.
   */
  thawedAt?: number;
  /** The activity's work after the thaw (its proof, the guard's release, the agent timeout put back), ms: a step outside the window. */
  afterMs?: number;
  /** The domain was gone (or shut off) when the thaw ran: nothing left to thaw. */
  domainGone?: boolean;
  /** Set when the host guard thawed the guest before this call: the freeze outlived its deadline. */
  guardFiredAt?: number;
  /** The guest migrated inside the window and was thawed on this host (not the freezing one). */
  thawedOn?: string;
  /** A hand-off thaw found this host in its own freeze window of the domain and left it alone. */
  skippedForLocalFreeze?: boolean;
  /**
   * The guest left the freezing host frozen and this run did not thaw it itself: `resolved` — the
   * host it runs on ended the freeze (its arrival guard or worker, after the deadline); `pending` —
   * not yet proven when the run stopped waiting (the hand-off goes on); `nowhere` — it stopped running.
   */
  handOff?: { outcome: 'resolved' | 'pending' | 'nowhere'; workflowId: string; message?: string };
}

export interface DiskResult {
  target: string;
  source: string;
  /** rbd://<fsid>/<pool>/<image>/<snap> of what the run produced. */
  location: string;
  snapshot: string;
  image?: string;
  contentBytes?: number;
  /** sha256 of the image content, when verify was requested (equal to the source snapshot's). */
  sha256?: string;
}

export interface SnapshotResult {
  workflowId: string;
  domain: { name: string; uuid: string };
  host: string;
  quiesced: boolean;
  /** Always set: why the result is or is not application-consistent. */
  quiesceReason: string;
  frozenFilesystems: number;
  /** Worker-measured: freeze call start → thaw call return; null when nothing was frozen. */
  freezeWindowMs: number | null;
  /** ISO time the freeze call started (worker clock), when quiesced; recorded on the images. */
  frozenAt?: string;
  freezeBreakdownMs?: { freeze: number; snapshot: number; thaw: number; gaps: number };
  /** The pre-flush before the freeze, outside the window (absent when the worker runs none). */
  preFlush?: { outcome: PreFlushOutcome; ms: number; error?: string };
  disks: DiskResult[];
  skippedDisks: { target: string; reason: string }[];
  stepsMs: Record<string, number>;
  /** True when an earlier run of this workflow id already produced these images. */
  reusedExisting?: boolean;
  /** What the schedule's retention policy kept and pruned after this run (input.retention set). */
  retention?: RetentionResult;
  /** DR mode (input target.mirror): the DR site has this run's point; absent otherwise. */
  mirror?: MirrorResult;
  /** Fleet runs: hosts the VM had left by the time its run got there (in order). */
  relocations?: { from: string; reason: string }[];
  /**
   * input.verifyEvery, when this run's set was due: the verdict of the vmsnap verify run it
   * started (a failed verdict does not fail the snapshot), or why that run itself failed.
   */
  verification?: Verification | { error: string; workflowId: string };
}

export interface FlattenProgress {
  target: string;
  done: number;
  total: number;
}
