import { RBD_NAME } from './input';

/*
 * Every name a run creates is a pure function of its workflow id, so a retried or re-run
 * workflow finds what an earlier attempt made instead of duplicating it.
 */

/** 64-bit FNV-1a as 16 hex chars: deterministic, dependency-free, fine for name uniqueness. */
export function fnv1a64(s: string): string {
  let h = 0xcbf29ce484222325n;
  const bytes = new TextEncoder().encode(s);
  for (const b of bytes) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, '0');
}

const CLEAN_KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;
/** What a Temporal Schedule appends to its action's workflow id: `-<RFC 3339 time>` of the run. */
const SCHEDULED_AT = /-(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * How a workflow id that is not itself name-safe becomes a run key. `hashed` is what runs used
 * before names were readable (`h` + 16 hex): workflow histories recorded then replay with it.
 * `readable`: a scheduled run's UTC time, `20260101T030000Z-1a2b3c4d`, or else the id's safe
 * characters, `snap-vm-42-x-h1a2b3c4d5e6f`; the hash (of the whole id) keeps two ids apart.
 */
export type RunKeyScheme = 'hashed' | 'readable';

/** A short name-safe key for a workflow id: the id itself when it is already safe. Deterministic. */
export function runKeyFor(workflowId: string, scheme: RunKeyScheme = 'readable'): string {
  if (CLEAN_KEY.test(workflowId)) return workflowId;
  const hash = fnv1a64(workflowId);
  if (scheme === 'hashed') return `h${hash}`;
  const at = scheduledAt(workflowId);
  if (at) return `${at}-${hash.slice(0, 8)}`;
  const slug = workflowId.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 24).replace(/[^A-Za-z0-9]+$/, '');
  return slug ? `${slug}-h${hash.slice(0, 12)}` : `h${hash}`;
}

/** The UTC time a Temporal Schedule's run id ends with, as `YYYYMMDDTHHMMSSZ`; null if none. */
export function scheduledAt(workflowId: string): string | null {
  const m = SCHEDULED_AT.exec(workflowId);
  if (!m) return null;
  const ms = Date.parse(`${m[1]}${m[2]}`);
  if (!Number.isFinite(ms)) return null;
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

export const SNAP_PREFIX = 'vmsnap-';
/** The snapshot Glance's RBD store expects on an image. */
export const IMAGE_SNAP = 'snap';

export function sourceSnapName(runKey: string): string {
  return `${SNAP_PREFIX}${runKey}`;
}

export function defaultImageName(domain: string, target: string, runKey: string): string {
  const name = `${domain}-${target}-${runKey}`;
  return RBD_NAME.test(name) ? name : `vmsnap-${target}-${fnv1a64(`${domain}/${runKey}`)}`;
}

export function lockWorkflowId(domainUuid: string): string {
  return `vmsnap-lock-${domainUuid.toLowerCase()}`;
}

/** One of `n` polled slots of a fleet limit: runs begun before `vmsnap-fifo-limits` only (src/model/limits.ts replaced them). */
export function slotWorkflowId(kind: 'window' | 'snap', scope: string, k: number): string {
  return `vmsnap-slot-${kind}-${scope}-${k}`;
}

export function rbdUrl(fsid: string, pool: string, image: string, snap: string, namespace?: string): string {
  const ns = namespace ? `${namespace}/` : '';
  return `rbd://${fsid}/${pool}/${ns}${image}/${snap}`;
}

/**
 * The host's queue for the copy pipeline (clone, flatten, finalize), polled by the same worker
 * with few slots, so bulk copies never take the CPU a freeze, snapshot or thaw needs.
 */
export function bulkTaskQueue(hostTaskQueue: string): string {
  return `${hostTaskQueue}-bulk`;
}
