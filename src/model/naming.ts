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

/** A short name-safe key for a workflow id: the id itself when it is already safe, else its hash. */
export function runKeyFor(workflowId: string): string {
  return CLEAN_KEY.test(workflowId) ? workflowId : `h${fnv1a64(workflowId)}`;
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

/** One of `n` slots of a fleet limit (`window` per host, `snap` per cluster): a lock workflow each. */
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
