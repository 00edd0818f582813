import { z } from 'zod';
import { DOMAIN_NAME, DOMAIN_UUID, HOST_ID, RBD_NAME } from './input';

/*
 * restoreVm's input, validated inside the workflow (and by the CLI) before any side effect.
 * `as` absent means in place.
 */

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

export const RestoreInputSchema = z
  .object({
    /** The VM whose image sets are searched: the name (or UUID) it had when snapshotted. */
    domain: z.string().refine((s) => DOMAIN_NAME.test(s) || DOMAIN_UUID.test(s), 'must be a libvirt domain name or a UUID'),
    /** A snapshot run's workflow id, or `latest` (the newest restorable set). */
    from: z.string().regex(RUN_ID, 'must be a workflow id or "latest"').default('latest'),
    /** Restore as a new VM with this name; absent: restore in place. */
    as: z.string().regex(DOMAIN_NAME, 'must be a libvirt domain name').optional(),
    /** In place: shut a running VM down gracefully (agent, then ACPI) first. */
    stop: z.boolean().default(false),
    /** Flatten the restored disks (independent of the images) instead of leaving them as clones. */
    flatten: z.boolean().default(false),
    /** Compare each restored disk's sha256 with its image before the VM starts. */
    verify: z.boolean().default(false),
    /** Pool the image sets are in. */
    imagePool: z.string().regex(RBD_NAME).default('images'),
    /** Pool for the restored disks; default: the pool the VM's disks were in. */
    vmPool: z.string().regex(RBD_NAME).optional(),
    /** `--as` on the fleet queue: the host the new VM is defined on (default: beside the source VM). */
    host: z.string().regex(HOST_ID, 'host must be a simple host id').optional(),
    /**
     * Set by the fleet router (workflows/restore-route.ts) for its child on the VM's host: every
     * name (restored disks, marks, --confirm) derives from the router's id. Must equal the parent's id.
     */
    routedBy: z.string().min(1).max(1000).optional(),
    /** `--as`: the new VM gets no network interfaces, so it cannot talk to anything. */
    isolate: z.boolean().default(false),
    /**
     * `--as` for `vmsnap verify` (workflows/verify.ts): once the copy is ready, run `check` in it
     * through the agent (bounded by checkTimeoutMs), then remove the copy and everything the
     * restore made, whatever the outcome. The result carries the check's outcome.
     */
    throwaway: z
      .object({
        check: z.array(z.string().min(1).max(4096)).min(1).max(64).optional(),
        checkTimeoutMs: z.number().int().positive().max(3_600_000).default(60_000),
      })
      .strict()
      .optional(),
    shutdownTimeoutMs: z.number().int().positive().max(3_600_000).default(120_000),
    readyTimeoutMs: z.number().int().positive().max(3_600_000).default(180_000),
  })
  .strict()
  .refine((r) => !(r.as && r.stop), { message: '--stop applies to in-place restores only (the source VM is never touched by --as)' })
  .refine((r) => !(r.host && !r.as), { message: 'host applies to --as only (an in-place restore runs where the VM is)' })
  .refine((r) => !(r.isolate && !r.as), { message: 'isolate applies to --as only' })
  .refine((r) => !(r.throwaway && !(r.as && r.isolate)), { message: 'a throw-away copy is an isolated --as restore' });

export type RestoreRequest = z.input<typeof RestoreInputSchema>;
export type RestoreInput = z.output<typeof RestoreInputSchema>;

export function parseRestoreInput(raw: unknown): { ok: true; input: RestoreInput } | { ok: false; message: string } {
  const r = RestoreInputSchema.safeParse(raw);
  if (r.success) return { ok: true, input: r.data };
  return { ok: false, message: r.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ') };
}
