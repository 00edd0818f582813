/**
 * A freeze is an obligation: from the moment vmsnap asks a guest agent to freeze until a thaw is
 * proven where the guest runs, some durable record says "vmsnap owes this guest a thaw". The
 * host journal (src/safety/freeze-journal.ts) is that record for the freezing host only; this is the
 * one every hypervisor of the cluster can read, kept in Ceph beside the owner records, so that the
 * host a frozen guest migrates to can honour it without the source host and without Temporal.
 *
 * Pure: the worker, the arrival guard started by libvirt's hook, the hand-off workflow and the
 * tests judge a record with these functions.
 */

import { UUID_RE, jsonFields } from './json-record';

export interface FreezeObligation {
  /** One per freeze call (the guard's arm): what a thaw resolves, so a late one cannot resolve a newer freeze. */
  freezeId: string;
  domainUuid: string;
  domainName: string;
  /** `<workflowId>/<runId>` of the run that froze. */
  owner: string;
  /** The host whose worker froze the guest. */
  host: string;
  /** Wall clock, ms since epoch. Hosts compare it across machines, so clocks must be NTP-synchronised (clockSkewMs). */
  frozenAt: number;
  deadlineAt: number;
  agentTimeoutSec: number;
  /** The guest's RBD disks: a domain no QEMU has open anywhere holds no freeze (rbd watchers). */
  disks: { pool: string; image: string; namespace?: string }[];
}

/** The RADOS object (in the image pool) whose omap holds one key per frozen domain: its UUID. */
export const OBLIGATIONS_OBJECT = 'vmsnap.freeze-obligations';

export function encodeObligation(o: FreezeObligation): string {
  return JSON.stringify(o);
}

/** A record as read back; anything malformed is undefined (never honoured: it could thaw someone else's freeze). */
export function decodeObligation(text: string): FreezeObligation | undefined {
  const f = jsonFields(text);
  if (!f) return undefined;
  const { o, str, num } = f;
  if (!str('freezeId') || !str('domainUuid') || !UUID_RE.test(o.domainUuid as string) || !str('domainName') || !str('owner') || !str('host')) return undefined;
  if (!num('frozenAt') || !num('deadlineAt') || !num('agentTimeoutSec') || !Array.isArray(o.disks)) return undefined;
  const disks = (o.disks as unknown[]).filter(
    (d): d is FreezeObligation['disks'][number] => !!d && typeof d === 'object' && typeof (d as { pool?: unknown }).pool === 'string' && typeof (d as { image?: unknown }).image === 'string',
  );
  return {
    freezeId: o.freezeId as string,
    domainUuid: (o.domainUuid as string).toLowerCase(),
    domainName: o.domainName as string,
    owner: o.owner as string,
    host: o.host as string,
    frozenAt: o.frozenAt as number,
    deadlineAt: o.deadlineAt as number,
    agentTimeoutSec: o.agentTimeoutSec as number,
    disks: disks.map((d) => ({ pool: d.pool, image: d.image, ...(typeof d.namespace === 'string' && d.namespace ? { namespace: d.namespace } : {}) })),
  };
}

/** When a host other than the freezing one may end the freeze: its deadline, plus the clocks' disagreement. */
export function dueAt(o: Pick<FreezeObligation, 'deadlineAt'>, clockSkewMs: number): number {
  return o.deadlineAt + clockSkewMs;
}

export type ArrivalVerdict =
  /** This host's own run holds the freeze in a live window (its watchdog and thaw answer for it). */
  | { act: 'leave'; why: string }
  /** Before the deadline the freezing run may still be snapshotting: a thaw now would cut its window short. */
  | { act: 'wait'; untilMs: number }
  | { act: 'thaw' };

/**
 * What a host that runs the guest does with an open record. Before the deadline (plus skew) the
 * freeze may still be the freezing run's window, wherever the guest runs now; after it, nobody
 * may keep the guest frozen, whoever froze it. A live window on this host of the same freeze is
 * this host's own to end.
 */
export function judgeArrival(o: FreezeObligation, now: number, clockSkewMs: number, localWindow?: { freezeId: string; live: boolean }): ArrivalVerdict {
  if (localWindow?.live && localWindow.freezeId === o.freezeId) return { act: 'leave', why: 'this host holds the freeze in a live window' };
  const due = dueAt(o, clockSkewMs);
  if (now < due) return { act: 'wait', untilMs: due };
  return { act: 'thaw' };
}

/**
 * Whether a late-freeze watch (a freeze call whose outcome was unknown, src/safety/late-freeze.ts)
 * may thaw the frozen guest it found. A freeze whose record is open, not yet due, and is not the
 * watched one is another run's window — vmsnap records every freeze before asking for it, on
 * every host — and a thaw would cut its snapshot short: leave it (its own guard ends it) and keep
 * watching. Anything else may be the watched call landing late: thaw. A freeze nobody recorded
 * (an operator's `virsh domfsfreeze`) cannot be told from a late one and is thawed: no guest stays
 * frozen comes first.
 */
export function judgeLateFreeze(open: FreezeObligation | undefined, watchedFreezeId: string | undefined, now: number, clockSkewMs: number): 'thaw' | 'leave' {
  if (!open || open.freezeId === watchedFreezeId) return 'thaw';
  return now < dueAt(open, clockSkewMs) ? 'leave' : 'thaw';
}
