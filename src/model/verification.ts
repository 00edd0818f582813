import { z } from 'zod';
import { DOMAIN_NAME, DOMAIN_UUID, HOST_ID, RBD_NAME } from './input';
import { FailureType } from './failures';

/*
 * `vmsnap verify`: an image set is restored as a throw-away, isolated VM, which must boot until
 * its agent answers and, optionally, pass a check command in the guest. The verdict is recorded on
 * every image of the set (VERIFY_META). Pure.
 */

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

export const VerifyInputSchema = z
  .object({
    /** The VM whose image set is verified: the name (or UUID) it had when snapshotted. */
    domain: z.string().refine((s) => DOMAIN_NAME.test(s) || DOMAIN_UUID.test(s), 'must be a libvirt domain name or a UUID'),
    from: z.string().regex(RUN_ID, 'must be a workflow id or "latest"').default('latest'),
    /** argv run in the copy through the agent's guest-exec (PATH is searched); exit 0 passes. */
    check: z.array(z.string().min(1).max(4096)).min(1).max(64).optional(),
    checkTimeoutMs: z.number().int().positive().max(3_600_000).default(60_000),
    /** How long the copy may take to boot until its agent answers. */
    readyTimeoutMs: z.number().int().positive().max(3_600_000).default(300_000),
    imagePool: z.string().regex(RBD_NAME).default('images'),
    /** The host the copy runs on (default: beside the source VM). */
    host: z.string().regex(HOST_ID, 'host must be a simple host id').optional(),
  })
  .strict();

export type VerifyRequest = z.input<typeof VerifyInputSchema>;
export type VerifyInput = z.output<typeof VerifyInputSchema>;

export function parseVerifyInput(raw: unknown): { ok: true; input: VerifyInput } | { ok: false; message: string } {
  const r = VerifyInputSchema.safeParse(raw);
  if (r.success) return { ok: true, input: r.data };
  return { ok: false, message: r.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ') };
}

/** What a check command did in the copy (its last run). `code` is null when it did not exit in time. */
export interface CheckOutcome {
  argv: string[];
  code: number | null;
  /** From the first run's start to the last one's end. */
  ms: number;
  /** Runs: the check is run again every 2 s until it exits 0 or its timeout passes. */
  attempts: number;
  /** The first 2 KiB of its stdout and stderr. */
  output: string;
}

/** The verdict recorded on an image set. */
export interface Verification {
  verdict: 'verified' | 'failed';
  /** Why it failed: the failure type and message, or the check's exit. */
  reason?: string;
  /** ISO time the verdict was reached. */
  at: string;
  /** The verify workflow. */
  workflowId: string;
  /** The copy's boot: start → agent answers. */
  readyMs?: number;
  check?: CheckOutcome;
}

export interface VerifyResult extends Verification {
  domain: { name: string; uuid: string };
  fromWorkflowId: string;
  /** The throw-away VM's name (gone when the result is returned). */
  copy: string;
  stepsMs: Record<string, number>;
}

/**
 * Failures of the copy that say the image set does not restore to a working VM: a verdict.
 * Anything else (Ceph or libvirt unreachable, bad input, a failed clean-up) is the run's own
 * failure, not the set's, and is raised as such.
 */
const VERDICT_FAILURES = new Set<string>([
  FailureType.GuestNotReady,
  FailureType.RestorePointIncomplete,
  FailureType.RestoreRecordUntrusted,
  FailureType.DefinitionRefused,
  FailureType.UnsupportedDisk,
  FailureType.DomainStartFailed,
]);

export function isVerdictFailure(type: string | undefined): boolean {
  return type !== undefined && VERDICT_FAILURES.has(type);
}

/** The throw-away VM's name: the source's, shortened, and the verify run's own suffix. */
export function copyName(source: string, runId: string): string {
  return `${source.slice(0, 40)}-verify-${runId.replace(/[^A-Za-z0-9]/g, '').slice(0, 8)}`;
}

export function encodeVerification(v: Verification): string {
  return JSON.stringify(v);
}

export function decodeVerification(raw: string | undefined): Verification | undefined {
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as Verification;
    return v && (v.verdict === 'verified' || v.verdict === 'failed') && typeof v.at === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}
