import type { RunScope } from './identity';
import { restoredDomainUuid } from './restore-plan';
import { RESTORE_META } from './restore-point';

/*
 * What the orphan reaper does with a disk in a VM pool that a restore touched. Pure: the caller
 * reads the image's metadata, the workflow's status and the host's domain definitions.
 *
 *  - A disk a restore made (`vmsnap.restore.workflow-id`) whose restore is closed without
 *    completing (terminated, timed out, or failed/cancelled with a compensation that did not get
 *    to it) is a leftover: removed.
 *  - A disk an in-place restore replaced (`vmsnap.restore.replaced-by`) whose restore completed
 *    is kept `keepReplacedMs` after the swap, then removed (`vmsnap restore --confirm` earlier).
 *
 * Never a disk a domain defined on this host uses, never one outside this worker's scope, never
 * one another host made or replaced (that host's domains, not this one's, say whether it is in
 * use: a kept disk of a VM shut off there looks unused from here), never one without that host
 * record (made before it was written: left to the operator), never on a guess: a status that
 * could not be read, or a workflow Temporal no longer knows, leaves it. Ceph's own view (watchers,
 * lock holders) is asked last, by the reaper, right before a removal (src/worker/restore-reaper.ts).
 */

/** Temporal's names for a workflow's status (WorkflowExecutionStatus), plus the two a lookup can give. */
export type RunStatus =
  | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TERMINATED' | 'CONTINUED_AS_NEW' | 'TIMED_OUT'
  | 'NOT_FOUND' | 'UNKNOWN';

export { RESTORE_SCOPE_META } from './metadata-keys';
import { RESTORE_SCOPE_META } from './metadata-keys';

const ENDED_UNFINISHED: ReadonlySet<RunStatus> = new Set<RunStatus>(['FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT']);

/** Closed, however: nobody is left to discard a throw-away copy (a completed one discarded its own). */
const CLOSED: ReadonlySet<RunStatus> = new Set<RunStatus>([...ENDED_UNFINISHED, 'COMPLETED']);

/**
 * A throw-away copy (vmsnap verify) whose restore is closed — terminated mid-check, its host
 * gone under it — still runs with nobody to discard it, and its domain keeps its disks "in use".
 * The domains to end before the disk follows the rule above: only for a disk marked throw-away,
 * made by this host in this scope, whose every user here is the copy that restore defined (the
 * UUID derived from its workflow id, which no other VM has). Anything else using it: none.
 */
export function throwawayCopyToEnd(
  meta: Readonly<Record<string, string>>,
  ctx: Pick<LeftoverContext, 'scope' | 'host' | 'statusOf'> & { users: { name: string; uuid: string }[] },
): { workflowId: string; status: RunStatus; domains: { name: string; uuid: string }[] } | null {
  const made = meta[RESTORE_META.workflowId];
  if (!made || meta[RESTORE_META.throwaway] !== '1' || !ctx.users.length || !madeHere(meta, ctx)) return null;
  const copy = restoredDomainUuid(made);
  if (!ctx.users.every((u) => u.uuid === copy)) return null;
  const status = ctx.statusOf(made);
  return CLOSED.has(status) ? { workflowId: made, status, domains: ctx.users } : null;
}


/** On a disk a restore made: its namespace, fleet and the host whose worker made it. */
export function restoreScopeMetadata(scope: RunScope, host: string): Record<string, string> {
  return { [RESTORE_SCOPE_META.namespace]: scope.namespace, [RESTORE_SCOPE_META.cluster]: scope.cluster, [RESTORE_SCOPE_META.host]: host };
}

/** On a disk an in-place restore replaced: that restore's namespace, fleet and host. */
export function replacedScopeMetadata(scope: RunScope, host: string): Record<string, string> {
  return {
    [RESTORE_SCOPE_META.replacedNamespace]: scope.namespace,
    [RESTORE_SCOPE_META.replacedCluster]: scope.cluster,
    [RESTORE_SCOPE_META.replacedHost]: host,
  };
}

export type LeftoverAction =
  | { action: 'leave' }
  | { action: 'remove-clone'; workflowId: string; status: RunStatus }
  | { action: 'remove-replaced'; workflowId: string; replacedAt: string };

export interface LeftoverContext {
  scope: RunScope;
  /** This worker's host id: only the host that made (or replaced) a disk judges it. */
  host: string;
  now: number;
  keepReplacedMs: number;
  /** The disk (`pool/image`, or `pool/namespace/image`) is a source of a domain defined on this host. */
  inUse: boolean;
  statusOf: (workflowId: string) => RunStatus;
}

/** The workflow ids whose status the decision needs (so the caller looks up only those). */
export function restoreIdsOf(meta: Readonly<Record<string, string>>): { made?: string; replacedBy?: string } {
  const made = meta[RESTORE_META.workflowId];
  const replacedBy = meta[RESTORE_META.replacedBy];
  return { ...(made ? { made } : {}), ...(replacedBy ? { replacedBy } : {}) };
}

export function restoreLeftoverAction(meta: Readonly<Record<string, string>>, ctx: LeftoverContext): LeftoverAction {
  if (ctx.inUse) return { action: 'leave' };
  const { made, replacedBy } = restoreIdsOf(meta);
  // A disk replaced by a restore is judged by that restore, whatever made it.
  if (replacedBy) {
    if (meta[RESTORE_SCOPE_META.replacedNamespace] !== ctx.scope.namespace || meta[RESTORE_SCOPE_META.replacedCluster] !== ctx.scope.cluster) {
      return { action: 'leave' };
    }
    if (meta[RESTORE_SCOPE_META.replacedHost] !== ctx.host) return { action: 'leave' };
    const replacedAt = meta[RESTORE_META.replacedAt] ?? '';
    const at = Date.parse(replacedAt);
    if (!Number.isFinite(at) || ctx.now - at < ctx.keepReplacedMs) return { action: 'leave' };
    return ctx.statusOf(replacedBy) === 'COMPLETED' ? { action: 'remove-replaced', workflowId: replacedBy, replacedAt } : { action: 'leave' };
  }
  if (made) {
    if (!madeHere(meta, ctx)) return { action: 'leave' };
    const status = ctx.statusOf(made);
    return ENDED_UNFINISHED.has(status) ? { action: 'remove-clone', workflowId: made, status } : { action: 'leave' };
  }
  return { action: 'leave' };
}

/** The disk was made by a restore of this namespace and fleet, on this host. */
function madeHere(meta: Readonly<Record<string, string>>, ctx: Pick<LeftoverContext, 'scope' | 'host'>): boolean {
  return meta[RESTORE_SCOPE_META.namespace] === ctx.scope.namespace && meta[RESTORE_SCOPE_META.cluster] === ctx.scope.cluster && meta[RESTORE_SCOPE_META.host] === ctx.host;
}
