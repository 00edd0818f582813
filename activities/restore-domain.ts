import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { openImage } from '../src/ceph';
import { failurePoint } from '../src/host/fault-points';
import type { DomainRef, LibvirtClient } from '../src/libvirt';
import { isNoDomain } from '../src/libvirt';
import { FailureType } from '../src/model/failures';
import { replacedScopeMetadata } from '../src/model/restore-leftovers';
import { rbdSpec } from '../src/model/restore-plan';
import { decodeRestorePoint, RESTORE_META, RESTORE_POINT_KEY } from '../src/model/restore-point';
import type { RestorePlan, RestorePoint } from '../src/model/restore-point';
import { rbdSourceNames, swapRbdSources } from '../src/restore/domain-xml-rewrite';
import type { ActivityDeps } from './deps';
import { during } from './step-error';
import { removeRestoreDisks } from './restore-disks';
import { trustedDefinition } from './restore-plan';

export interface RestoreDomainRequest {
  workflowId: string;
  plan: RestorePlan;
}

/**
 * virDomainShutdownFlags (guest agent, then ACPI) and wait for shut off. A guest that does not
 * power off in time is left running, untouched: ShutdownTimeout.
 */
export function stopDomain(deps: ActivityDeps) {
  return async function stopDomain(req: RestoreDomainRequest & { timeoutMs: number }): Promise<{ ms: number }> {
    const lv = await deps.libvirt();
    const dom = await during('look up domain', () => lv.lookupDomainByUuid(req.plan.domain.uuid));
    const t0 = Date.now();
    if ((await lv.getDomainState(dom)).state === 'shutoff') return { ms: 0 };
    await during(`shut down ${dom.name}`, () => lv.domainShutdownFlags(dom, { agent: req.plan.hasAgent, acpi: true }));
    while (Date.now() - t0 < req.timeoutMs) {
      await sleep(500);
      heartbeat({ waitedMs: Date.now() - t0 });
      if ((await lv.getDomainState(dom)).state === 'shutoff') return { ms: Date.now() - t0 };
    }
    throw ApplicationFailure.nonRetryable(`${dom.name} did not power off within ${req.timeoutMs} ms (left running)`, FailureType.ShutdownTimeout);
  };
}

/**
 * The swap. `as`: defines the new VM from the recorded definition (new name, UUID, MACs, disks,
 * chardev paths). In place: marks the replaced disks, then redefines the VM with each restored
 * disk in place of the one it replaces — the only change made to its definition.
 */
export function defineRestoredDomain(deps: ActivityDeps) {
  return async function defineRestoredDomain(req: RestoreDomainRequest): Promise<void> {
    const lv = await deps.libvirt();
    const { plan } = req;
    if (plan.mode === 'as') {
      // The record is read again here: it is checked again, not trusted from the plan.
      const xml = await trustedDefinition(deps, await readRecord(deps, plan), plan);
      await during(`define ${plan.domain.name}`, () => lv.domainDefineXml(xml));
    } else {
      for (const d of plan.disks) await markReplaced(deps, d.previous!, req.workflowId);
      const dom = await during('look up domain', () => lv.lookupDomainByUuid(plan.domain.uuid));
      const current = await during('read domain XML', () => lv.getDomainXml(dom, { inactive: true }));
      const map = new Map(plan.disks.map((d) => [rbdSpec(d.previous!), rbdSpec(d.clone)]));
      await during(`redefine ${dom.name}`, () => lv.domainDefineXml(swapRbdSources(current, map)));
    }
    await failurePoint('restore:after-swap');
  };
}

/** virDomainCreate unless it already runs. */
export function startRestoredDomain(deps: ActivityDeps) {
  return async function startRestoredDomain(req: RestoreDomainRequest): Promise<void> {
    const lv = await deps.libvirt();
    const dom = await during('look up domain', () => lv.lookupDomainByUuid(req.plan.domain.uuid));
    if ((await lv.getDomainState(dom)).state === 'running') return;
    await during(`start ${dom.name}`, () => lv.domainCreate(dom), START_FAILED);
  };
}

/** libvirtd unreachable stays Unavailable (retried); QEMU refusing to start the VM is this type. */
const START_FAILED = { type: FailureType.DomainStartFailed, nonRetryable: false, keep: [FailureType.Unavailable, FailureType.PermissionDenied] } as const;

/** Ready: running, and its guest agent answers guest-ping (when it has an agent channel). */
export function waitGuestReady(deps: ActivityDeps) {
  return async function waitGuestReady(req: RestoreDomainRequest & { timeoutMs: number }): Promise<{ ms: number }> {
    const lv = await deps.libvirt();
    const dom = await during('look up domain', () => lv.lookupDomainByUuid(req.plan.domain.uuid));
    const t0 = Date.now();
    let last = 'not yet asked';
    while (Date.now() - t0 < req.timeoutMs) {
      heartbeat({ waitedMs: Date.now() - t0, last });
      const { state } = await lv.getDomainState(dom);
      if (state !== 'running') {
        last = `domain is ${state}`;
      } else if (!req.plan.hasAgent) {
        return { ms: Date.now() - t0 };
      } else {
        try {
          await lv.guestPing(dom, 2);
          return { ms: Date.now() - t0 };
        } catch (err) {
          last = err instanceof Error ? err.message : String(err);
        }
      }
      await sleep(1000);
    }
    throw ApplicationFailure.nonRetryable(`${dom.name} not ready within ${req.timeoutMs} ms: ${last}`, FailureType.GuestNotReady);
  };
}

/**
 * Compensation, idempotent and safe at any point of a restore: `as` — the new domain is destroyed
 * and undefined; in place — a VM running on restored disks is destroyed, its definition gets its
 * previous disks back, their marks are removed, and it is started again if it ran before. Then
 * the disks the restore made are removed.
 */
export function undoRestore(deps: ActivityDeps) {
  return async function undoRestore(req: RestoreDomainRequest): Promise<{ removed: string[] }> {
    const lv = await deps.libvirt();
    const { plan } = req;
    const dom = await lookupOrNull(lv, plan.domain.uuid);
    if (plan.mode === 'as') {
      if (dom) {
        if ((await lv.getDomainState(dom)).state !== 'shutoff') await destroyIfRunning(lv, dom);
        await during(`undefine ${dom.name}`, () => lv.domainUndefineFlags(dom));
      }
    } else if (dom) {
      const current = await during('read domain XML', () => lv.getDomainXml(dom, { inactive: true }));
      const clones = new Set(plan.disks.map((d) => rbdSpec(d.clone)));
      if (rbdSourceNames(current).some((n) => clones.has(n))) {
        await destroyIfRunning(lv, dom);
        const back = new Map(plan.disks.map((d) => [rbdSpec(d.clone), rbdSpec(d.previous!)]));
        await during(`redefine ${dom.name} with its previous disks`, () => lv.domainDefineXml(swapRbdSources(current, back)));
      }
      for (const d of plan.disks) await unmarkReplaced(deps, d.previous!, req.workflowId);
    }
    const removed = await removeRestoreDisks(deps, req.workflowId, plan.disks);
    if (plan.mode === 'in-place' && plan.wasRunning && dom && (await lv.getDomainState(dom)).state === 'shutoff') {
      await during(`start ${dom.name} again`, () => lv.domainCreate(dom));
    }
    return { removed };
  };
}

async function readRecord(deps: ActivityDeps, plan: RestorePlan): Promise<RestorePoint> {
  const loc = plan.disks[0].image;
  const io = await deps.ioctx(loc.pool, loc.namespace);
  const img = await during(`open image ${loc.image}`, () => openImage(io, loc.image, { readOnly: true }));
  try {
    const point = decodeRestorePoint(await img.getMetadata(RESTORE_POINT_KEY));
    if (!point) throw ApplicationFailure.nonRetryable(`${rbdSpec(loc)} lost its restore record`, FailureType.RestorePointIncomplete);
    return point;
  } finally {
    await img.close();
  }
}

async function markReplaced(deps: ActivityDeps, loc: { pool: string; image: string; namespace?: string }, workflowId: string): Promise<void> {
  const io = await deps.ioctx(loc.pool, loc.namespace);
  const img = await during(`open ${loc.image}`, () => openImage(io, loc.image));
  try {
    await img.setMetadata(RESTORE_META.replacedBy, workflowId);
    await img.setMetadata(RESTORE_META.replacedAt, new Date().toISOString());
    for (const [k, v] of Object.entries(replacedScopeMetadata(deps.scope, deps.host))) await img.setMetadata(k, v);
  } finally {
    await img.close();
  }
}

async function unmarkReplaced(deps: ActivityDeps, loc: { pool: string; image: string; namespace?: string }, workflowId: string): Promise<void> {
  const io = await deps.ioctx(loc.pool, loc.namespace);
  const img = await during(`open ${loc.image}`, () => openImage(io, loc.image));
  try {
    if ((await img.getMetadata(RESTORE_META.replacedBy)) !== workflowId) return;
    await img.removeMetadata(RESTORE_META.replacedBy);
    for (const k of [RESTORE_META.replacedAt, ...Object.keys(replacedScopeMetadata(deps.scope, deps.host))]) await img.removeMetadata(k).catch(() => undefined);
  } finally {
    await img.close();
  }
}

async function destroyIfRunning(lv: LibvirtClient, dom: DomainRef): Promise<void> {
  if ((await lv.getDomainState(dom)).state === 'shutoff') return;
  await during(`destroy ${dom.name}`, () => lv.domainDestroy(dom));
}

async function lookupOrNull(lv: LibvirtClient, uuid: string): Promise<DomainRef | null> {
  try {
    return await lv.lookupDomainByUuid(uuid);
  } catch (err) {
    if (isNoDomain(err)) return null;
    throw err;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function heartbeat(details: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // outside an activity (tests)
  }
}

