/**
 * Every name vmsnap writes into Ceph for its own bookkeeping, in one place: RBD image metadata
 * keys (on images, restored disks and replaced disks) and the omap object of snapshot owner
 * records. They are read back by retention, the reaper, list/restore and re-runs of older
 * releases, so a key is never renamed.
 */

/** Ownership labels written as RBD image metadata on everything vmsnap creates. */
export const META = {
  owner: 'vmsnap.owner',
  /** pool/name the image was created as; a clone of it inherits the key with the wrong value. */
  image: 'vmsnap.image',
  workflowId: 'vmsnap.workflow-id',
  domain: 'vmsnap.domain',
  source: 'vmsnap.source',
  state: 'vmsnap.state',
  createdAt: 'vmsnap.created-at',
  quiesced: 'vmsnap.quiesced',
  /** With quiesced: the freeze the image comes from, so a reset or re-run can report it truthfully. */
  frozenFilesystems: 'vmsnap.frozen-filesystems',
  frozenAt: 'vmsnap.frozen-at',
  quiesceReason: 'vmsnap.quiesce-reason',
  flattenStarted: 'vmsnap.flatten-started',
  labelPrefix: 'vmsnap.label.',
} as const;

/** Image metadata keys recording the run's scope and the VM's identity (beside META). */
export const IDENTITY_META = {
  domainUuid: 'vmsnap.domain-uuid',
  namespace: 'vmsnap.temporal-namespace',
  cluster: 'vmsnap.cluster',
} as const;

/** Metadata vmsnap writes on the disks a restore creates, and on the disks it replaces. */
export const RESTORE_META = {
  /** On a restored disk: the restore workflow that made it (its ownership). */
  workflowId: 'vmsnap.restore.workflow-id',
  /** On a restored disk: the image@snap it was cloned from. */
  from: 'vmsnap.restore.from',
  /** On a restored disk (in place): the disk it replaces, `pool/image`. */
  previous: 'vmsnap.restore.previous',
  flattenStarted: 'vmsnap.restore.flatten-started',
  /** On a replaced disk: the restore workflow that replaced it, until `vmsnap restore --confirm`. */
  replacedBy: 'vmsnap.restore.replaced-by',
  /** On a disk of a throw-away copy (vmsnap verify): '1'. Its domain goes with it once the run is closed. */
  throwaway: 'vmsnap.restore.throwaway',
  replacedAt: 'vmsnap.restore.replaced-at',
} as const;

/** Keys recording the scope of the restore that made a disk, and of the one that replaced it. */
export const RESTORE_SCOPE_META = {
  namespace: 'vmsnap.restore.temporal-namespace',
  cluster: 'vmsnap.restore.cluster',
  replacedNamespace: 'vmsnap.restore.replaced-temporal-namespace',
  replacedCluster: 'vmsnap.restore.replaced-cluster',
  /**
   * The host whose worker made the disk, and the one whose restore replaced it. Every host reaps
   * the shared pools but sees only its own domains, so only that host judges whether it is in use.
   */
  host: 'vmsnap.restore.host',
  replacedHost: 'vmsnap.restore.replaced-host',
} as const;

/** On every image of a set: the last `vmsnap verify` verdict (JSON, src/model/verification.ts). */
export const VERIFY_META = 'vmsnap.verify';

/** The restore record on every image of a finished image set (src/model/restore-point.ts). */
export const RESTORE_POINT_KEY = 'vmsnap.restore-point';

/** The per-pool (namespace) RADOS object whose omap holds snapshot owner records. */
export const OWNER_OBJECT = 'vmsnap.snap-owners';
