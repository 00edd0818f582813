import { isInvalidState, isNoDomain } from '../libvirt';
import { nowMs } from '../host/clock';
import type { LibvirtClient } from '../libvirt';

/**
 * The one thaw of vmsnap. The workflow's thaw activity, the host guard's watchdog, the sweeper,
 * reconcile at start and `vmsnap thaw` all end a freeze through this function, so they cannot
 * disagree on what "thawed" means:
 *
 *   virDomainFSThaw → guest-fsfreeze-status → (still frozen: thaw again → status)
 *
 * Thaw first, then confirm: the thaw is what a frozen guest needs, the status is the proof.
 * Every agent call is bounded by the agent timeout. Resolves only on proof — the agent says
 * `thawed`, or the domain is gone (libvirt error 42) or shut off — and throws otherwise, so a
 * caller keeps its journal entry on anything else (libvirtd unreachable, agent hung).
 */
export type ThawOutcome =
  | {
      outcome: 'thawed';
      thawedFilesystems: number;
      /** the guest was frozen when we looked */
      wasFrozen: boolean;
      /**
       * When the guest was thawed (wall ms): the return of the thaw call that thawed it, or the
       * status that found it thawed after a thaw call that failed. The proof comes after it.
       */
      thawedAt: number;
    }
  | { outcome: 'gone'; reason: string };

export async function thawAndConfirm(lv: LibvirtClient, domainUuid: string, agentTimeoutSec: number): Promise<ThawOutcome> {
  let dom;
  try {
    dom = await lv.lookupDomainByUuid(domainUuid);
  } catch (err) {
    if (isNoDomain(err)) return { outcome: 'gone', reason: 'no such domain (libvirt error 42)' };
    throw err;
  }
  const callOpts = { timeoutMs: agentTimeoutSec * 1000 + 2000 };
  let thawedFilesystems = 0;
  let firstError: unknown;
  let thawedAt: number | undefined;
  try {
    thawedFilesystems = await lv.fsThaw(dom, undefined, callOpts);
    thawedAt = nowMs();
  } catch (err) {
    firstError = err;
  }
  let status: 'thawed' | 'frozen';
  try {
    status = await lv.fsFreezeStatus(dom, agentTimeoutSec, callOpts);
    thawedAt ??= nowMs();
    if (status === 'frozen') {
      thawedFilesystems += await lv.fsThaw(dom, undefined, callOpts);
      thawedAt = nowMs();
      status = await lv.fsFreezeStatus(dom, agentTimeoutSec, callOpts);
    }
  } catch (err) {
    if (isNoDomain(err)) return { outcome: 'gone', reason: 'no such domain (libvirt error 42)' };
    if (isInvalidState(err) && (await isShutOff(lv, dom))) return { outcome: 'gone', reason: 'domain is shut off' };
    throw new ThawNotConfirmedError(`thaw of ${dom.name} not confirmed: ${messageOf(err)}`, firstError ?? err);
  }
  if (status !== 'thawed') {
    throw new ThawNotConfirmedError(`${dom.name} is still ${status} after two thaws`, firstError);
  }
  return { outcome: 'thawed', thawedFilesystems, wasFrozen: thawedFilesystems > 0, thawedAt };
}

/** A thaw whose effect could not be proven; the caller must keep trying (and keep its journal). */
export class ThawNotConfirmedError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ThawNotConfirmedError';
  }
}

async function isShutOff(lv: LibvirtClient, dom: { uuid: string; name: string }): Promise<boolean> {
  try {
    const { state } = await lv.getDomainState(dom as never);
    // Paused is NOT gone: a paused guest resumes exactly as frozen as it was.
    return state === 'shutoff' || state === 'crashed';
  } catch (err) {
    return isNoDomain(err);
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
