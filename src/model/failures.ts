/**
 * Stable failure type names. They cross the Temporal server as `ApplicationFailure.type`, so
 * schedulers, the CLI and the UI filter on them; never rename one.
 */
export const FailureType = {
  /** Workflow input or CLI flags are malformed. Never retryable. */
  InvalidInput: 'InvalidInput',
  /** The domain does not exist on this host. */
  DomainNotFound: 'DomainNotFound',
  /** The domain exists but is not running (paused, shut off...). */
  DomainNotRunning: 'DomainNotRunning',
  /** A disk the caller asked for is not RBD-backed, or not attached. */
  UnsupportedDisk: 'UnsupportedDisk',
  /** quiesce=require and the guest agent is missing, unresponsive or froze nothing. */
  QuiesceUnavailable: 'QuiesceUnavailable',
  /** A target image or snapshot name is taken by something vmsnap did not create for this run. */
  NameConflict: 'NameConflict',
  /** A pool does not exist or cannot be opened with the configured key. */
  PoolUnavailable: 'PoolUnavailable',
  /** Another snapshot workflow holds this domain. */
  DomainBusy: 'DomainBusy',
  /**
   * The guest is already frozen by someone else (an operator, another tool). vmsnap never takes
   * over or ends a freeze it did not make: nothing is armed, created or thawed. Never retryable.
   */
  GuestFrozenByOther: 'GuestFrozenByOther',
  /** The guest could not be frozen (agent error other than "not configured"). */
  FreezeFailed: 'FreezeFailed',
  /** The snapshot call did not finish inside its bound (lock owner unresponsive, Ceph down...). */
  SnapshotTimeout: 'SnapshotTimeout',
  SnapshotFailed: 'SnapshotFailed',
  /** Thaw failed; the compensation keeps retrying and escalates. */
  ThawFailed: 'ThawFailed',
  /** The freeze outlived its deadline (monotonic clock) or the host guard thawed the guest. */
  FreezeDeadlineExceeded: 'FreezeDeadlineExceeded',
  /**
   * Something other than this run thawed the guest inside its window (an operator's thaw, another
   * tool): the run's own thaw thawed fewer filesystems than its freeze froze.
   */
  FreezeInterrupted: 'FreezeInterrupted',
  /**
   * The guest migrated while frozen and the run could not prove when the freeze ended: another
   * host ended it (after the deadline), or the hand-off that will is still under way.
   */
  FreezeHandedOff: 'FreezeHandedOff',
  /**
   * DR mode (target.mirror): a disk's image does not mirror in snapshot mode as the primary side
   * (`rbd mirror image enable POOL/IMAGE snapshot`). Found before anything is frozen. Never retryable.
   */
  MirrorNotEnabled: 'MirrorNotEnabled',
  /**
   * DR mode: this host has no DR site configured (drCeph), or its cluster does not answer: at the
   * check before the freeze (nothing frozen), or through a wait that ran out on a look the DR site
   * left unanswered (the run's snapshot is removed here; no replicated point is claimed).
   */
  MirrorUnavailable: 'MirrorUnavailable',
  /**
   * DR mode: a mirror snapshot failed, or the DR site did not have this run's snapshots within
   * target.mirror.waitMs, or its copy was complete without them (removed here first): no
   * replicated point of this run is claimed. The local snapshot was fine; the run fails so that
   * nobody counts on the copy.
   */
  MirrorNotReplicated: 'MirrorNotReplicated',
  CloneFailed: 'CloneFailed',
  /** verify: the flattened image differs from the source snapshot. */
  ContentMismatch: 'ContentMismatch',
  FlattenFailed: 'FlattenFailed',
  /** librados/librbd or libvirtd is unreachable; retryable. */
  Unavailable: 'Unavailable',
  PermissionDenied: 'PermissionDenied',
  /** A bounded call on a live source image (snapshot lookup/removal) got no answer in time; retryable. */
  SourceCallTimeout: 'SourceCallTimeout',
  /**
   * Fleet runs: the VM left the host the run was sent to before anything was frozen or created
   * there (migrated or stopped). The router locates it again; on a per-host queue it is final.
   */
  DomainMoved: 'DomainMoved',
  /** Fleet runs: the VM moved more than MAX_RELOCATIONS times during one run. Retryable. */
  DomainKeepsMoving: 'DomainKeepsMoving',
  /** Fleet runs: no live host to ask, or two hosts both report the VM running. Retryable. */
  DomainNotPlaced: 'DomainNotPlaced',
  /** Fleet runs: the host running the run stopped beating (worker or host gone). Retryable. */
  HostLost: 'HostLost',
  /** No turn of a fleet limit (freeze windows per host, snapshots per cluster) came in time, or its queue is full. Retryable. */
  FleetBusy: 'FleetBusy',
  /** restore: no image set of this VM for the requested run. */
  RestorePointNotFound: 'RestorePointNotFound',
  /** restore: the run's images are not all finalized, or carry no restore record. */
  RestorePointIncomplete: 'RestorePointIncomplete',
  /**
   * restore --as: the restore record carries no valid MAC from this fleet's restore key (planted
   * or altered in the images pool, written before records were signed, or no key configured on
   * this worker). Not retryable: the message names the fix.
   */
  RestoreRecordUntrusted: 'RestoreRecordUntrusted',
  /** restore --as: the definition it would define has a host device, a host path or a disk outside the allow-list. */
  DefinitionRefused: 'DefinitionRefused',
  /** restore --as / verify: no live host has the new VM's memory free beyond its reserve (memoryReserveMiB). */
  NoCapacity: 'NoCapacity',
  /** restore in place: the VM runs and --stop was not given. */
  DomainRunning: 'DomainRunning',
  /** restore --stop: the guest did not power off within the timeout. */
  ShutdownTimeout: 'ShutdownTimeout',
  /** restore: the restored VM's guest agent did not answer within the timeout. */
  GuestNotReady: 'GuestNotReady',
  /** restore: libvirt could not start the restored VM (QEMU refused it: a disk, the definition). */
  DomainStartFailed: 'DomainStartFailed',
  /**
   * One or more undo steps failed after every step had its turn; the message names each, and the
   * first failure is the cause. Never retryable: the run already ended.
   */
  CompensationFailed: 'CompensationFailed',
  /** A libvirt error with no more specific type; details carry its code, domain and procedure. */
  LibvirtError: 'LibvirtError',
  /** A librbd/librados error with no more specific type; details carry its errno and C call. */
  RbdError: 'RbdError',
  /** Anything else an activity threw: a bug or an unforeseen condition; retryable. */
  InternalError: 'InternalError',
  /** The fault-injection suite failed the activity at a named point (never in production). */
  FaultInjected: 'FaultInjected',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/**
 * The failure detail a freeze step attaches when it failed before virDomainFSFreeze was sent (its
 * status check, its agent-timeout change, its guard arming): nothing of this run can be frozen in
 * the guest, so the workflow must not thaw, watch for a late freeze or hand a freeze off — any of
 * those could end a freeze vmsnap never made. Without the mark the outcome counts as unknown.
 */
export const FREEZE_NOT_SENT = { freezeSent: false } as const;

/** Whether one of a failure's details is {@link FREEZE_NOT_SENT} (details as they cross the server). */
export function saysFreezeNotSent(details: readonly unknown[] | null | undefined): boolean {
  return (details ?? []).some((d) => typeof d === 'object' && d !== null && (d as { freezeSent?: unknown }).freezeSent === false);
}

