import { isNoDomain } from '../libvirt';
import type { LibvirtClient } from '../libvirt';
import { judgeArrival } from '../model/freeze-obligation';
import { freezeFields } from '../model/run-log-fields';
import type { FreezeObligation } from '../model/freeze-obligation';
import type { FreezeGuard } from './freeze-guard';
import { isOverdue } from './freeze-journal';
import { thawAndConfirm } from './thaw-confirm';
import type { Metrics } from '../host/metrics';

/**
 * The destination side of a freeze that travelled: a guest this host runs whose cluster-wide
 * obligation (src/model/freeze-obligation.ts) is still open is thawed here once its deadline has
 * passed, by whoever asks — the worker's reconcile at start and its sweeper, or the arrival guard
 * libvirt's hook starts when a guest migrates in (src/cli/commands/arrival-guard.ts), which needs
 * neither the freezing host nor Temporal nor this host's worker.
 */
export interface ArrivalsDeps {
  libvirt: () => Promise<LibvirtClient>;
  guard: FreezeGuard;
  /** How far two hosts' wall clocks may disagree (config clockSkewMs). */
  clockSkewMs: number;
  log: (level: 'info' | 'warn' | 'error', message: string, fields: Record<string, unknown>) => void;
  onThawed?: (o: FreezeObligation, thawedFilesystems: number) => void;
}

export interface ArrivalsPass {
  /** Obligations this pass ended (thaw proven here, record resolved). */
  honoured: { obligation: FreezeObligation; thawedFilesystems: number }[];
  /** Open obligations of guests running here that are not due yet (their freezing run's window may be open). */
  waiting: FreezeObligation[];
  /** The earliest time an open obligation of a guest running here falls due (wall ms), if any. */
  nextDueAt?: number;
}

/** One look at the open obligations; `only` restricts it to one domain (the hook's guard). */
export async function honourArrivals(d: ArrivalsDeps, only?: string): Promise<ArrivalsPass> {
  const out: ArrivalsPass = { honoured: [], waiting: [] };
  // Both connections at once: at a worker's start each is a fresh handshake, and a guest that
  // arrived frozen waits for the sum (the bound is 2 s from the worker's start).
  const connecting = d.libvirt();
  connecting.catch(() => undefined);
  const open = (await d.guard.obligations()).filter((o) => !only || o.domainUuid === only.toLowerCase());
  if (!open.length) return out;
  const lv = await connecting;
  for (const o of open) {
    let state: string;
    try {
      state = (await lv.getDomainState(await lv.lookupDomainByUuid(o.domainUuid))).state;
    } catch (err) {
      if (isNoDomain(err)) continue; // not here: the host that runs it answers for it
      throw err;
    }
    // Paused (an incoming migration, or an operator's pause) resumes as frozen as it was: later.
    if (state !== 'running') {
      if (state === 'paused') out.nextDueAt = Math.min(out.nextDueAt ?? Infinity, Date.now() + 1000);
      continue;
    }
    const local = await d.guard.read(o.domainUuid);
    const verdict = judgeArrival(o, Date.now(), d.clockSkewMs, local?.freezeId ? { freezeId: local.freezeId, live: local.mode === 'window' && !isOverdue(local) } : undefined);
    if (verdict.act === 'leave') continue;
    if (verdict.act === 'wait') {
      out.nextDueAt = Math.min(out.nextDueAt ?? Infinity, verdict.untilMs);
      out.waiting.push(o);
      continue;
    }
    const r = await thawAndConfirm(lv, o.domainUuid, o.agentTimeoutSec);
    if (r.outcome === 'gone') continue;
    if (local?.freezeId === o.freezeId) await d.guard.clear(o.domainUuid);
    else await d.guard.resolve(o.domainUuid, o.freezeId);
    d.onThawed?.(o, r.thawedFilesystems);
    d.log(r.wasFrozen ? 'warn' : 'info', `freeze obligation of ${o.domainName} honoured here: ${r.wasFrozen ? `thawed ${r.thawedFilesystems} filesystem(s)` : 'already thawed'}`, {
      ...freezeFields(o),
      frozenOn: o.host,
      owner: o.owner,
      freezeId: o.freezeId,
      overdueMs: Date.now() - o.deadlineAt,
      layer: 'arrival',
    });
    out.honoured.push({ obligation: o, thawedFilesystems: r.thawedFilesystems });
  }
  return out;
}

/** A process's levelled logger (the worker's, the CLI's). */
type LevelLog = Record<'info' | 'warn' | 'error', (message: string, fields?: Record<string, unknown>) => void>;

/** The arrivals deps as every worker-side caller builds them: its logger, and the `arrival` thaw metric. */
export function arrivalsVia(libvirt: () => Promise<LibvirtClient>, guard: FreezeGuard, metrics: Metrics, log: LevelLog, clockSkewMs: number): ArrivalsDeps {
  return {
    libvirt,
    guard,
    clockSkewMs,
    log: (level, message, fields) => log[level](message, fields),
    onThawed: (o, n) => {
      if (n === 0) return;
      metrics.thaws.inc({ layer: 'arrival' });
      // A window that travelled with its guest, ended here; it began on the freezing host's clock.
      metrics.freezeWindowEnded(o, Date.now());
    },
  };
}
