import { ApplicationFailure } from '@temporalio/common';
import { imageExists, openImage } from '../src/ceph';
import type { LibvirtClient, DomainRef } from '../src/libvirt';
import { isNoDomain, parseDomainXml } from '../src/libvirt';
import { FailureType } from '../src/model/failures';
import { IMAGE_SNAP } from '../src/model/naming';
import type { RestoreInput } from '../src/model/restore-input';
import {
  chooseImageSet, parseRbdSpec, rbdSpec, restoredDiskNameAs, restoredDiskNameInPlace, restoredDomainUuid,
} from '../src/model/restore-plan';
import { decodeRestorePoint, imageSetsOf, RESTORE_META, RESTORE_POINT_KEY } from '../src/model/restore-point';
import type { CatalogImage, ImageSet, RestoreDiskPlan, RestorePlan, RestorePoint } from '../src/model/restore-point';
import { definitionRefusal } from '../src/restore/definition-allow-list';
import { rewriteForNewDomain } from '../src/restore/domain-xml-rewrite';
import { verifyRestorePointMac } from '../src/restore/record-mac';
import { restoreKeyFix } from '../src/host/restore-key';
import { poolCatalog } from './catalog';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

export interface PlanRestoreRequest {
  workflowId: string;
  input: RestoreInput;
}

/**
 * Every check a restore needs, before anything changes: the run exists and is restorable, the
 * target name is free (or this restore's own), the VM is shut off (or may be stopped), its disks
 * match the record, and no restored-disk name is taken by something else. Read-only.
 */
export function planRestore(deps: ActivityDeps) {
  return async function planRestore(req: PlanRestoreRequest): Promise<RestorePlan> {
    const { input, workflowId } = req;
    const catalog = await poolCatalog(deps, input.imagePool);
    const chosen = chooseImageSet(input.domain, imageSetsOf(input.domain, catalog), input.from);
    if (!chosen.ok) throw ApplicationFailure.nonRetryable(chosen.message, chosen.type);
    const point = recordOf(chosen.set, catalog);
    for (const d of point.disks) await requireImageSnap(deps, d.image);
    const lv = await deps.libvirtReadOnly();
    const plan = input.as
      ? await planAs(deps, lv, input, input.as, workflowId, point)
      : await planInPlace(deps, lv, input, workflowId, point);
    for (const d of plan.disks) await requireFreeOrOurs(deps, d.clone, workflowId);
    return plan;
  };
}

export interface RestoreSource {
  /** The VM the chosen image set was taken of, as its restore record names it. */
  domain: { name: string; uuid: string };
  /** The run the set came from: `latest` resolved once, so every host restores the same set. */
  fromWorkflowId: string;
  /** The VM's `<memory>` in its recorded definition: what a copy of it needs where it is placed. */
  memoryKiB?: number;
}

/**
 * Which image set a restore takes, and of which VM: read from Ceph by any worker of the fleet, so
 * the router can find that VM's host by UUID. Read-only; bad input fails here, non-retryable.
 */
export function restoreSource(deps: ActivityDeps) {
  return async function restoreSource(req: { input: RestoreInput }): Promise<RestoreSource> {
    const { input } = req;
    const catalog = await poolCatalog(deps, input.imagePool);
    const chosen = chooseImageSet(input.domain, imageSetsOf(input.domain, catalog), input.from);
    if (!chosen.ok) throw ApplicationFailure.nonRetryable(chosen.message, chosen.type);
    const point = recordOf(chosen.set, catalog);
    const { memoryKiB } = parseDomainXml(point.domainXml);
    return { domain: point.domain, fromWorkflowId: point.workflowId, ...(memoryKiB ? { memoryKiB } : {}) };
  };
}

function recordOf(set: ImageSet, catalog: CatalogImage[]): RestorePoint {
  for (const d of set.disks) {
    const img = catalog.find((c) => `${c.pool}/${c.name}` === d.image);
    const p = decodeRestorePoint(img?.meta[RESTORE_POINT_KEY]);
    if (p) return p;
  }
  throw ApplicationFailure.nonRetryable(`run ${set.workflowId} has no restore record`, FailureType.RestorePointIncomplete);
}

async function planAs(deps: ActivityDeps, lv: LibvirtClient, input: RestoreInput, name: string, workflowId: string, point: RestorePoint): Promise<RestorePlan> {
  const uuid = restoredDomainUuid(workflowId);
  const disks: RestoreDiskPlan[] = point.disks.map((d) => {
    const vmPool = input.vmPool ?? parseRbdSpec(d.source).pool;
    return { target: d.target, image: parseRbdSpec(d.image), snap: IMAGE_SNAP, clone: { pool: vmPool, image: restoredDiskNameAs(name, d.target) } };
  });
  // First: nothing is read from a record vmsnap did not write, nor defined outside the allow-list.
  await trustedDefinition(deps, point, { domain: { name, uuid }, disks, isolate: input.isolate });
  const existing = await lookupOrNull(lv, name);
  if (existing && existing.uuid !== uuid) {
    throw ApplicationFailure.nonRetryable(`a domain named ${name} already exists (UUID ${existing.uuid})`, FailureType.NameConflict);
  }
  const info = parseDomainXml(point.domainXml);
  const restored = new Set(point.disks.map((d) => d.source));
  for (const d of info.disks) {
    if (d.device !== 'disk' || d.readonly) continue;
    const spec = d.rbd ? `${d.rbd.pool}/${d.rbd.namespace ? `${d.rbd.namespace}/` : ''}${d.rbd.image}` : undefined;
    if (!spec || !restored.has(spec)) {
      // The new VM would write to the original's disk.
      throw ApplicationFailure.nonRetryable(
        `disk ${d.target} of ${point.domain.name} is not in run ${point.workflowId}: a new VM cannot share it`,
        FailureType.UnsupportedDisk,
      );
    }
  }
  const alreadyRestored = existing !== null && (await lv.getDomainState(existing)).state === 'running';
  return {
    mode: 'as',
    domain: { name, uuid },
    source: point.domain,
    fromWorkflowId: point.workflowId,
    quiesced: point.quiesced,
    takenAt: point.recordedAt,
    wasRunning: false,
    hasAgent: info.hasAgentChannel,
    alreadyRestored,
    ...(input.isolate ? { isolate: true } : {}),
    disks,
  };
}

/**
 * The definition `restore --as` defines: the record's, rewritten for the new VM — only when the
 * record's MAC verifies with the fleet's restore key (RestoreRecordUntrusted otherwise) and the
 * result passes the allow-list (DefinitionRefused). Checked at planning, before anything is
 * made, and again by the define step on the record it reads then.
 */
export async function trustedDefinition(
  deps: ActivityDeps,
  point: RestorePoint,
  plan: Pick<RestorePlan, 'domain' | 'disks' | 'isolate'>,
): Promise<string> {
  const key = deps.restoreKey ? await deps.restoreKey() : undefined;
  const untrusted = (why: string) =>
    ApplicationFailure.nonRetryable(`the restore record of run ${point.workflowId} is not trusted: ${why}`, FailureType.RestoreRecordUntrusted);
  if (!key?.ok) {
    const file = key?.file ?? '/etc/vmsnap/restore.key';
    throw untrusted(`${key?.why ?? 'this worker has no restore key'}; ${restoreKeyFix(file)} (VMSNAP_RESTORE_KEY_FILE), then take a new snapshot`);
  }
  const mac = verifyRestorePointMac(point, key.key);
  if (!mac.ok) throw untrusted(`${mac.why}; restore it in place, or take a new snapshot with the fleet's restore key in place`);
  const map = new Map<string, string>();
  for (const d of plan.disks) {
    const recorded = point.disks.find((x) => x.target === d.target);
    if (!recorded) throw ApplicationFailure.nonRetryable(`restore record has no disk ${d.target}`, FailureType.RestorePointIncomplete);
    map.set(recorded.source, rbdSpec(d.clone));
  }
  const xml = rewriteForNewDomain(point.domainXml, { name: plan.domain.name, uuid: plan.domain.uuid, disks: map, isolate: plan.isolate });
  const refused = definitionRefusal(xml, point.domainXml, {
    clones: new Set(plan.disks.map((d) => rbdSpec(d.clone))),
    imagePool: plan.disks[0]?.image.pool ?? '',
    name: plan.domain.name,
  });
  if (refused) {
    throw ApplicationFailure.nonRetryable(`${plan.domain.name} would be defined with ${refused}: not defined`, FailureType.DefinitionRefused);
  }
  return xml;
}

async function planInPlace(deps: ActivityDeps, lv: LibvirtClient, input: RestoreInput, workflowId: string, point: RestorePoint): Promise<RestorePlan> {
  // By UUID only: a domain that has the name but another UUID is another VM (a reused name).
  const dom = await lookupOrNull(lv, point.domain.uuid);
  if (!dom) {
    const other = await lookupOrNull(lv, point.domain.name);
    const why = other ? `; the domain named ${other.name} here has UUID ${other.uuid}: another VM (restore --as a new one instead)` : '';
    throw ApplicationFailure.nonRetryable(`domain ${point.domain.name} (${point.domain.uuid}) does not exist on this host${why}`, FailureType.DomainNotFound);
  }
  const { state } = await during('read domain state', () => lv.getDomainState(dom));
  const info = parseDomainXml(await during('read domain XML', () => lv.getDomainXml(dom, { inactive: true })));
  const disks: RestoreDiskPlan[] = [];
  let ours = 0;
  for (const d of point.disks) {
    const cur = info.disks.find((x) => x.target === d.target);
    if (!cur?.rbd) {
      throw ApplicationFailure.nonRetryable(`${dom.name} has no RBD disk ${d.target} to restore into`, FailureType.UnsupportedDisk);
    }
    let previous = { pool: cur.rbd.pool, image: cur.rbd.image, ...(cur.rbd.namespace ? { namespace: cur.rbd.namespace } : {}) };
    const madeBy = await restoreOwner(deps, previous);
    if (madeBy?.workflowId === workflowId && madeBy.previous) {
      // This restore already swapped this disk (a re-run of a finished restore).
      ours++;
      previous = parseRbdSpec(madeBy.previous);
    }
    const clone = { pool: input.vmPool ?? previous.pool, image: restoredDiskNameInPlace(previous.image, workflowId) };
    disks.push({ target: d.target, image: parseRbdSpec(d.image), snap: IMAGE_SNAP, clone, previous });
  }
  const alreadyRestored = ours === disks.length;
  if (state !== 'shutoff' && !alreadyRestored && !input.stop) {
    throw ApplicationFailure.nonRetryable(`${dom.name} is ${state}: shut it off first, or pass --stop`, FailureType.DomainRunning);
  }
  return {
    mode: 'in-place',
    domain: { name: dom.name, uuid: dom.uuid },
    source: point.domain,
    fromWorkflowId: point.workflowId,
    quiesced: point.quiesced,
    takenAt: point.recordedAt,
    wasRunning: state !== 'shutoff',
    hasAgent: info.hasAgentChannel,
    alreadyRestored,
    ...(input.isolate ? { isolate: true } : {}),
    disks,
  };
}

async function lookupOrNull(lv: LibvirtClient, nameOrUuid: string): Promise<DomainRef | null> {
  try {
    return await lv.lookupDomain(nameOrUuid);
  } catch (err) {
    if (isNoDomain(err)) return null;
    throw err;
  }
}

async function requireImageSnap(deps: ActivityDeps, spec: string): Promise<void> {
  const loc = parseRbdSpec(spec);
  const io = await deps.ioctx(loc.pool, loc.namespace);
  const img = await during(`open image ${spec}`, () => openImage(io, loc.image, { readOnly: true }));
  try {
    if (!(await img.snapExists(IMAGE_SNAP))) {
      throw ApplicationFailure.nonRetryable(`${spec} has no snapshot @${IMAGE_SNAP}`, FailureType.RestorePointIncomplete);
    }
  } finally {
    await img.close();
  }
}

/** Which restore made this disk, if one did. */
export async function restoreOwner(deps: ActivityDeps, loc: { pool: string; image: string; namespace?: string }): Promise<{ workflowId: string; previous?: string } | null> {
  const io = await deps.ioctx(loc.pool, loc.namespace);
  if (!(await imageExists(io, loc.image))) return null;
  const img = await openImage(io, loc.image, { readOnly: true });
  try {
    const wf = await img.getMetadata(RESTORE_META.workflowId);
    if (!wf) return null;
    const previous = await img.getMetadata(RESTORE_META.previous);
    return { workflowId: wf, ...(previous ? { previous } : {}) };
  } finally {
    await img.close();
  }
}

async function requireFreeOrOurs(deps: ActivityDeps, loc: { pool: string; image: string; namespace?: string }, workflowId: string): Promise<void> {
  const io = await during(`open pool ${loc.pool}`, () => deps.ioctx(loc.pool, loc.namespace));
  if (!(await imageExists(io, loc.image))) return;
  const owner = await restoreOwner(deps, loc);
  if (owner?.workflowId !== workflowId) {
    throw ApplicationFailure.nonRetryable(`${rbdSpec(loc)} already exists and is not this restore's`, FailureType.NameConflict);
  }
}
