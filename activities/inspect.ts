import { ApplicationFailure } from '@temporalio/common';
import { parseDomainXml, isAgentNotConfigured } from '../src/libvirt';
import { isNotFound, isPermissionDenied } from '../src/ceph';
import type { DomainDisk, DomainRef } from '../src/libvirt';
import { FailureType } from '../src/model/failures';
import type { InspectRequest, InspectResult, InspectedDisk } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';
import { frozenByOther } from './freeze';
import { checkMirroring } from './mirror';

/**
 * Checks before anything changes: the domain exists and runs, its disks and their RBD sources,
 * the guest agent answers, the pools open with our key; in DR mode, that the disks mirror. Everything but the agent ping goes over
 * the read-only libvirt connection; libvirt allows agent commands only read-write.
 */
export function inspectDomain(deps: ActivityDeps) {
  return async function inspectDomain(req: InspectRequest): Promise<InspectResult> {
    // A run that may freeze: its watchdog starts now, so arming it later costs no process start.
    if (req.quiesce !== 'skip') deps.guard.prewarm();
    const lv = await deps.libvirtReadOnly();
    const dom = await during(`look up domain ${req.domain}`, () => lv.lookupDomain(req.domain));
    const { state } = await during('read domain state', () => lv.getDomainState(dom));
    if (state !== 'running') {
      throw ApplicationFailure.nonRetryable(`domain ${dom.name} is ${state}, not running`, FailureType.DomainNotRunning);
    }
    const xml = await during('read domain XML', () => lv.getDomainXml(dom));
    const info = parseDomainXml(xml);
    const disks = info.disks.filter((d) => d.device === 'disk').map(toInspected);

    const agent = { configured: info.hasAgentChannel, responding: false } as InspectResult['agent'];
    if (req.quiesce !== 'skip' && info.agentChannelState === 'disconnected') {
      // libvirt already knows no qemu-ga has the channel open: no read-write call needed to say so.
      agent.error = 'guest agent channel is disconnected (qemu-ga not running in the guest)';
    } else if (req.quiesce !== 'skip' && info.hasAgentChannel) {
      try {
        await (await deps.libvirt()).guestPing(dom, req.agentTimeoutSec);
        agent.responding = true;
      } catch (err) {
        if (isAgentNotConfigured(err)) agent.configured = false;
        agent.error = err instanceof Error ? err.message : String(err);
      }
      if (agent.responding) await failIfFrozenByOther(deps, dom, req.agentTimeoutSec);
    }

    const pools = new Set(disks.flatMap((d) => (d.rbd ? [d.rbd.pool] : [])));
    if (req.targetPool) pools.add(req.targetPool);
    for (const pool of pools) {
      await openPool(deps, pool);
    }
    if (req.mirror) await checkMirroring(deps, disks, req.mirror.disks);
    const cluster = await deps.rados();
    const fsid = await during('read cluster fsid', () => cluster.fsid());
    return { domain: { name: dom.name, uuid: dom.uuid }, host: deps.host, fsid, disks, agent, ...(deps.limits ? { limits: deps.limits } : {}) };
  };
}

/**
 * A guest somebody else froze is theirs: fail before anything is created or locked. A freeze this
 * host journaled is vmsnap's own (a run in its window, or a watched late freeze) and is left to
 * the domain lock and the freeze step.
 */
async function failIfFrozenByOther(deps: ActivityDeps, dom: DomainRef, agentTimeoutSec: number): Promise<void> {
  const status = await during('read guest-fsfreeze-status', async () => (await deps.libvirt()).fsFreezeStatus(dom, agentTimeoutSec));
  if (status !== 'frozen' || (await deps.guard.read(dom.uuid))) return;
  // A freeze vmsnap made on another host (the guest migrated frozen): the freeze step judges it.
  if (await during('read freeze obligations', () => deps.guard.obligationOf(dom.uuid))) return;
  throw frozenByOther(dom.name, 'guest-fsfreeze-status says frozen and this host has no record of freezing it');
}

async function openPool(deps: ActivityDeps, pool: string): Promise<void> {
  try {
    await deps.ioctx(pool);
  } catch (err) {
    if (isNotFound(err)) throw ApplicationFailure.nonRetryable(`pool ${pool} does not exist`, FailureType.PoolUnavailable);
    if (isPermissionDenied(err)) {
      throw ApplicationFailure.nonRetryable(`pool ${pool}: permission denied for vmsnap's cephx key`, FailureType.PermissionDenied);
    }
    throw err;
  }
}

function toInspected(d: DomainDisk): InspectedDisk {
  if (d.rbd) {
    if (d.rbd.snapshot) return { target: d.target, unsupported: `RBD source pinned to snapshot ${d.rbd.snapshot}` };
    if (d.readonly) return { target: d.target, unsupported: 'read-only disk' };
    const rbd = { pool: d.rbd.pool, image: d.rbd.image, ...(d.rbd.namespace ? { namespace: d.rbd.namespace } : {}) };
    return { target: d.target, rbd };
  }
  const src: string = d.sourceFile ?? d.sourceDev ?? d.type;
  return { target: d.target, unsupported: `${d.type} disk (${src}), not RBD` };
}
