import { IDENTITY_META, inScope } from '../model/identity';
import type { RunScope } from '../model/identity';
import { planRetention } from '../model/retention';
import type { KeepReason, RetentionPolicy } from '../model/retention';
import type { CatalogImage } from '../model/restore-point';
import { META } from '../model/types';
import { isOwned } from '../retention/owned-images';
import type { Owner } from '../retention/owned-images';
import { CliError, Exit } from './exit-codes';

/*
 * What `vmsnap delete` and `vmsnap prune` will remove, decided over a pool's catalog before
 * anything is removed. Pure: the catalog is read, and the images removed, by the commands.
 */

/** Made by vmsnap as this very image (a clone of one carries its keys, with its parent's name). */
function madeAsItself(img: CatalogImage): boolean {
  return img.meta[META.owner] === 'vmsnap' && img.meta[META.image] === `${img.pool}/${img.name}`;
}

/** `domain` as the operator gave it: the recorded name, or the recorded UUID (any case). */
function namesVm(img: CatalogImage, domain: string): boolean {
  return img.meta[META.domain] === domain || img.meta[IDENTITY_META.domainUuid]?.toLowerCase() === domain.toLowerCase();
}

export interface DeletePlan {
  owner: Owner;
  workflowId: string;
  createdAt: string;
  quiesced: boolean | null;
  /** Image names in the pool, sorted. */
  images: string[];
}

/**
 * The set run `workflowId` made of `domain`, if vmsnap may remove it: the same ownership as a
 * schedule's retention (madeAsItself, the VM's UUID, this scope), without the schedule label.
 * Anything else is refused with a typed CliError, exit 2.
 */
export function planDelete(catalog: readonly CatalogImage[], req: { pool: string; domain: string; workflowId: string; scope: RunScope }): DeletePlan {
  const candidates = catalog.filter((i) => madeAsItself(i) && i.meta[META.workflowId] === req.workflowId);
  if (!candidates.length) throw new CliError(`no image set of run ${req.workflowId} in pool ${req.pool} (vmsnap list shows the sets)`, Exit.badInput, 'SetNotFound');
  // Workflow ids are unique within a namespace only: another namespace's run of the same id is
  // another set, never this one.
  const set = candidates.filter((i) => i.meta[IDENTITY_META.domainUuid] !== undefined && inScope(i.meta, req.scope));
  if (!set.length) {
    if (candidates.some((i) => i.meta[IDENTITY_META.domainUuid] === undefined)) {
      throw new CliError(`run ${req.workflowId}'s set records no VM UUID (made before vmsnap recorded one): nothing proves it is ${req.domain}'s; vmsnap leaves it alone`, Exit.badInput, 'NotOwned');
    }
    const c = candidates[0]!.meta;
    throw new CliError(
      `run ${req.workflowId}'s set was made by another Temporal namespace or fleet (${c[IDENTITY_META.namespace]}/${c[IDENTITY_META.cluster]}, this is ${req.scope.namespace}/${req.scope.cluster}): delete it from there`,
      Exit.badInput,
      'NotOwned',
    );
  }
  const other = set.find((i) => !namesVm(i, req.domain));
  if (other) throw new CliError(`run ${req.workflowId}'s set is of ${other.meta[META.domain]}, not ${req.domain}`, Exit.badInput, 'NotOwned');
  const uuids = new Set(set.map((i) => i.meta[IDENTITY_META.domainUuid]!.toLowerCase()));
  if (uuids.size > 1) throw new CliError(`run ${req.workflowId}'s images name ${uuids.size} VMs: vmsnap leaves them alone`, Exit.badInput, 'NotOwned');
  const owner: Owner = { pool: req.pool, domain: set[0]!.meta[META.domain]!, domainUuid: set[0]!.meta[IDENTITY_META.domainUuid]!, scope: req.scope };
  // The one rule every remover uses must agree with the checks above.
  if (!set.every((i) => isOwned(i.meta, i.name, owner))) throw new CliError(`run ${req.workflowId}'s set is not vmsnap's to remove`, Exit.badInput, 'NotOwned');
  const unfinished = set.filter((i) => i.meta[META.state] !== 'complete');
  if (unfinished.length) {
    throw new CliError(
      `run ${req.workflowId}'s set is not complete (${unfinished.map((i) => `${i.name}: ${i.meta[META.state] || 'no state'}`).join(', ')}): a run may still be making it; the worker's orphan reaper removes what a failed run left`,
      Exit.badInput,
      'SetIncomplete',
    );
  }
  return {
    owner,
    workflowId: req.workflowId,
    createdAt: set.map((i) => i.meta[META.createdAt] ?? '').sort()[0] ?? '',
    quiesced: quiesced(set[0]!),
    images: set.map((i) => i.name).sort(),
  };
}

export interface PruneSet {
  workflowId: string;
  createdAt: string;
  quiesced: boolean | null;
  schedule: string | null;
  images: string[];
  /** Why it is kept; empty: it is removed. */
  reasons: KeepReason[];
}

export interface PrunePlan {
  /** Undefined when the VM has no set vmsnap may touch. */
  owner?: Owner;
  /** Newest first. */
  sets: PruneSet[];
  /** Sets under this VM's name vmsnap leaves alone: no UUID recorded, another namespace or fleet, or an earlier name of the VM. */
  ignored: number;
}

/**
 * A retention policy over the VM's sets (with `scheduleId`, that schedule's only), as a schedule's
 * own retention would plan it: planRetention over the images isOwned admits.
 */
export function planPrune(
  catalog: readonly CatalogImage[],
  req: { pool: string; domain: string; scope: RunScope; scheduleId?: string; policy: RetentionPolicy; now: number },
): PrunePlan {
  const ofVm = catalog.filter((i) => madeAsItself(i) && namesVm(i, req.domain) && (req.scheduleId === undefined || i.meta[`${META.labelPrefix}schedule`] === req.scheduleId));
  const inScopeRuns = new Map<string, Set<string>>();
  for (const i of catalog) {
    if (!madeAsItself(i) || i.meta[IDENTITY_META.domainUuid] === undefined || !inScope(i.meta, req.scope)) continue;
    const run = i.meta[META.workflowId] ?? i.name;
    inScopeRuns.set(run, (inScopeRuns.get(run) ?? new Set()).add(i.meta[IDENTITY_META.domainUuid]!.toLowerCase()));
  }
  // A run whose images name two VMs is nobody's to judge: delete refuses it, prune leaves it.
  const usable = ofVm.filter((i) => i.meta[IDENTITY_META.domainUuid] !== undefined && inScope(i.meta, req.scope) && inScopeRuns.get(i.meta[META.workflowId] ?? i.name)!.size === 1);
  const uuids = [...new Set(usable.map((i) => i.meta[IDENTITY_META.domainUuid]!.toLowerCase()))];
  if (uuids.length > 1) {
    throw new CliError(`${req.domain} names ${uuids.length} VMs (UUIDs ${uuids.join(', ')}; one was deleted and recreated): give the UUID`, Exit.badInput, 'AmbiguousDomain');
  }
  const runsOf = (imgs: readonly CatalogImage[]) => new Set(imgs.map((i) => i.meta[META.workflowId] ?? i.name));
  if (!uuids.length) return { sets: [], ignored: runsOf(ofVm).size };
  const first = usable.find((i) => i.meta[IDENTITY_META.domainUuid]!.toLowerCase() === uuids[0])!;
  const owner: Owner = {
    pool: req.pool,
    domain: first.meta[META.domain]!,
    domainUuid: first.meta[IDENTITY_META.domainUuid]!,
    scope: req.scope,
    ...(req.scheduleId !== undefined ? { scheduleId: req.scheduleId } : {}),
  };
  const owned = usable.filter((i) => isOwned(i.meta, i.name, owner));
  const plan = planRetention(
    owned.map((i) => ({ name: i.name, createdAt: i.meta[META.createdAt] ?? '', state: i.meta[META.state] ?? '', run: i.meta[META.workflowId] })),
    req.policy,
    req.now,
  );
  const byName = new Map(owned.map((i) => [i.name, i]));
  const sets = plan.runs.map((r): PruneSet => {
    const imgs = r.images.map((n) => byName.get(n)!);
    return {
      workflowId: imgs[0]!.meta[META.workflowId] ?? r.run,
      createdAt: imgs.map((i) => i.meta[META.createdAt] ?? '').sort()[0] ?? '',
      quiesced: quiesced(imgs[0]!),
      schedule: imgs[0]!.meta[`${META.labelPrefix}schedule`] ?? null,
      images: r.images,
      reasons: r.reasons,
    };
  });
  const kept = runsOf(owned);
  return { owner, sets, ignored: [...runsOf(ofVm)].filter((r) => !kept.has(r)).length };
}

function quiesced(img: CatalogImage): boolean | null {
  const q = img.meta[META.quiesced];
  return q === 'true' ? true : q === 'false' ? false : null;
}
