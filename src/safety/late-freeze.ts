import type { LibvirtClient } from '../libvirt';
import { judgeLateFreeze } from '../model/freeze-obligation';
import type { FreezeObligation } from '../model/freeze-obligation';

/** Where the freeze obligations are read from (the guard's store, or the watchdog's own). */
export type ObligationReader = { read(domainUuid: string): Promise<FreezeObligation | undefined> };

/** What a late-freeze watch knows of the freeze it watches for. */
export interface WatchedFreeze {
  domainUuid: string;
  agentTimeoutSec: number;
  /** The freeze whose call had an unknown outcome (absent in entries from before freeze ids). */
  freezeId?: string;
}

/**
 * The late-freeze watch's one question before it thaws, asked by the watchdog (a watch's own
 * process) and by the worker's sweeper and reconcile alike: is the guest frozen by another run
 * right now? A watch runs for `lateSnapshotWatchMs` after its run gave up on a freeze call, and
 * within it another run may freeze the same guest — on this host through another state dir, or
 * after a migration back here. That run recorded its freeze before asking for it
 * (src/safety/freeze-guard.ts `arm`), so an open, not-yet-due record of another freeze is its
 * window: the watch leaves it (that run's guard ends it) and goes on watching.
 *
 * Returns that record, or undefined when a thaw may go ahead: the guest is not frozen, the
 * record is the watched freeze's or overdue, or anything could not be read — an unreadable
 * record must not keep a guest frozen.
 */
export async function anotherRunsWindow(
  lv: LibvirtClient,
  watch: WatchedFreeze,
  obligations: ObligationReader | undefined,
  clockSkewMs: number,
): Promise<FreezeObligation | undefined> {
  if (!obligations) return undefined;
  try {
    const dom = await lv.lookupDomainByUuid(watch.domainUuid);
    if ((await lv.fsFreezeStatus(dom, watch.agentTimeoutSec, { timeoutMs: watch.agentTimeoutSec * 1000 + 2000 })) !== 'frozen') return undefined;
  } catch {
    return undefined;
  }
  return recordedOtherWindow(watch, obligations, clockSkewMs);
}

/** The same question for a caller that has just seen the guest frozen itself (the watch's watchdog). */
export async function recordedOtherWindow(
  watch: WatchedFreeze,
  obligations: ObligationReader | undefined,
  clockSkewMs: number,
): Promise<FreezeObligation | undefined> {
  if (!obligations) return undefined;
  try {
    const open = await obligations.read(watch.domainUuid);
    return judgeLateFreeze(open, watch.freezeId, Date.now(), clockSkewMs) === 'leave' ? open : undefined;
  } catch {
    return undefined;
  }
}
