import { z } from 'zod';
import { RetentionPolicySchema } from './retention';

/*
 * One schema validates workflow input, CLI flags and the names derived from them. It is pure so
 * the workflow sandbox can run it before any activity is scheduled: bad input fails the run with
 * nothing frozen and nothing created.
 */

/** Libvirt domain names on our hosts: no whitespace, no shell or RBD metacharacters. */
export const DOMAIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$/;
export const DOMAIN_UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** RBD pool and image names: `/` and `@` separate pool, image and snapshot in RBD specs. */
export const RBD_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
/** Disk target devices as libvirt names them (vda, sdb, hdc, xvdd...). */
export const DISK_TARGET = /^[a-z]{2,4}[a-z]{1,3}$/;
/** Task-queue-safe host identifiers. */
export const HOST_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

const domainRef = z
  .string()
  .min(1)
  .max(64)
  .refine((s) => DOMAIN_NAME.test(s) || DOMAIN_UUID.test(s), {
    message: 'must be a libvirt domain name ([A-Za-z0-9._+-], max 63 chars) or a UUID',
  });

const rbdName = (what: string) =>
  z.string().regex(RBD_NAME, `${what} must match ${RBD_NAME} (no '/', '@', spaces or shell characters)`);

const positiveMs = (what: string, max: number) =>
  z
    .number()
    .int(`${what} must be an integer number of milliseconds`)
    .positive(`${what} must be > 0`)
    .max(max, `${what} must be <= ${max} ms`);

export const QuiescePolicy = z.enum(['require', 'prefer', 'skip']);
export type QuiescePolicy = z.infer<typeof QuiescePolicy>;

export const SnapshotInputSchema = z
  .strictObject({
    /** Domain name or UUID on the host whose worker runs this workflow. */
    domain: domainRef,
    /**
     * Set only by the fleet router on the run it starts on the VM's host: that run names its
     * snapshots and images after the router's workflow id (this value), so a run that moves
     * between hosts keeps one set of names. Must equal the parent workflow's id.
     */
    routedBy: z.string().min(1).max(1000).optional(),
    /** Host id of the hypervisor (selects the task queue); informational inside the workflow. */
    host: z.string().regex(HOST_ID, 'host must be a simple host id').optional(),
    /** Disk targets (e.g. ["vdb"]); default: every RBD-backed disk. */
    disks: z.array(z.string().regex(DISK_TARGET, 'disk must be a target device like vdb')).min(1).max(64).optional(),
    /** With the default disk set, skip non-RBD disks instead of failing. */
    skipNonRbdDisks: z.boolean().default(false),
    quiesce: QuiescePolicy.default('prefer'),
    target: z
      .strictObject({
        /** Image pool for the flattened copies. */
        pool: rbdName('target.pool').default('images'),
        /** Image name per disk target; default `<domain>-<disk>-<run key>`. */
        images: z.record(z.string().regex(DISK_TARGET), rbdName('target image name')).optional(),
        /** false: keep only the RBD snapshot on the source image (no clone, no flatten). */
        clone: z.boolean().default(true),
        /**
         * DR mode (docs/dr.md): after the thaw, a mirror snapshot of every disk carries the run's
         * snapshots to the DR site (the worker's drCeph), and the run waits until they are there,
         * at most waitMs. Every disk's image must mirror in snapshot mode, primary here.
         */
        mirror: z
          .strictObject({
            waitMs: positiveMs('target.mirror.waitMs', 24 * 3600_000).default(600_000),
          })
          .optional(),
      })
      .prefault({}),
    /** Max time a guest may stay frozen. 10 s also respects Windows VSS's own limit. */
    freezeDeadlineMs: positiveMs('freezeDeadlineMs', 60_000).default(10_000),
    /** libvirt agent response timeout for freeze/thaw/ping, in seconds. */
    agentTimeoutSec: z.number().int().min(1).max(60).default(5),
    /** Bound on the snapshot step; far below librbd's ~29 s lock-break. */
    snapshotTimeoutMs: positiveMs('snapshotTimeoutMs', 20_000).default(8_000),
    /** Bound on one flatten attempt. */
    flattenTimeoutMs: positiveMs('flattenTimeoutMs', 24 * 3600_000).default(6 * 3600_000),
    /**
     * Read the flattened image and the source snapshot back through librbd and compare their
     * sha256 before the snapshot is dropped (costs two full reads; worth it on Ceph 16, where an
     * interrupted flatten can silently zero objects).
     */
    verify: z.boolean().default(false),
    /**
     * After a snapshot call timed out, how long cleanup keeps watching for a snapshot that the
     * image's lock owner creates late (when it wakes up), to remove it.
     */
    lateSnapshotWatchMs: z.number().int().min(0).max(600_000).default(60_000),
    /** Labels recorded on created images (e.g. the schedule that owns them). */
    labels: z
      .record(z.string().regex(/^[a-z][a-z0-9_.-]{0,31}$/), z.string().max(256).regex(/^[^\0\n]*$/))
      .refine((r) => Object.keys(r).length <= 16, 'at most 16 labels')
      .default({}),
    /**
     * After a successful run, prune older images of the same schedule (labels.schedule) and
     * domain down to this policy. Never touches an image without both labels.
     */
    retention: RetentionPolicySchema.optional(),
    /**
     * After a successful run, verify its image set (vmsnap verify: an isolated throw-away copy
     * boots, `verifyCheck` passes) when none of the verifyEvery−1 sets of this VM (and schedule)
     * before it carries a verdict: 1 verifies every run.
     */
    verifyEvery: z.number().int().min(1).max(1000).optional(),
    /** With verifyEvery: argv run in the copy through the agent's guest-exec (exit 0 passes). */
    verifyCheck: z.array(z.string().min(1).max(4096)).min(1).max(64).optional(),
  })
  .refine((i) => i.snapshotTimeoutMs < i.freezeDeadlineMs, {
    message: 'snapshotTimeoutMs must be below freezeDeadlineMs (the snapshot happens inside the freeze)',
    path: ['snapshotTimeoutMs'],
  })
  .refine((i) => i.agentTimeoutSec * 1000 < i.freezeDeadlineMs, {
    message: 'agentTimeoutSec must be below freezeDeadlineMs',
    path: ['agentTimeoutSec'],
  })
  .refine((i) => !i.retention || !!i.labels.schedule, {
    message: 'retention requires labels.schedule: it only prunes images carrying that schedule label',
    path: ['retention'],
  })
  .refine((i) => !i.verifyEvery || i.target.clone, {
    message: 'verifyEvery restores the image set; there is none with target.clone=false (snapshot-only mode)',
    path: ['verifyEvery'],
  })
  .refine((i) => !i.verifyCheck || !!i.verifyEvery, { message: 'verifyCheck applies with verifyEvery only', path: ['verifyCheck'] })
  .refine((i) => !i.retention || i.target.clone, {
    message: 'retention prunes images; it cannot be used with target.clone=false (snapshot-only mode)',
    path: ['retention'],
  });

export type SnapshotInput = z.infer<typeof SnapshotInputSchema>;
export type SnapshotRequest = z.input<typeof SnapshotInputSchema>;

export type ParseResult = { ok: true; input: SnapshotInput } | { ok: false; message: string };

/** Validates raw input; the message lists every problem with its path, for humans and logs. */
export function parseSnapshotInput(raw: unknown): ParseResult {
  const r = SnapshotInputSchema.safeParse(raw);
  if (r.success) return { ok: true, input: r.data };
  const message = r.error.issues
    .map((i) => `${i.path.length ? i.path.join('.') : 'input'}: ${i.message}`)
    .join('; ');
  return { ok: false, message };
}
