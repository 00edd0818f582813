import type { RunScope } from './identity';

/*
 * The record naming the run that owns one of vmsnap's snapshots of a live source image. It lives
 * in an omap of a vmsnap-owned RADOS object in the image's pool (not in the image header: writing
 * there goes through the image's exclusive-lock owner, the VM's QEMU — see README, "Calls on a
 * live image"). Written before the snapshot is requested; dropped only once the snapshot is gone
 * or proven never created.
 */

/** The RADOS object holding the owner records of one pool (namespace) in its omap. */
export { OWNER_OBJECT } from './metadata-keys';

export interface OwnerRecord {
  workflowId: string;
  namespace: string;
  cluster: string;
  domainUuid?: string;
  /** ISO-8601: when the record was written, just before the snapshot was requested. */
  recordedAt: string;
  /** `kept`: a finished snapshot-only result, no longer a run's temporary. */
  state: 'pending' | 'kept';
  quiesced?: boolean;
  /** The freeze a kept snapshot comes from (see quiesce-record.ts): what a reset reports. */
  frozenFilesystems?: number;
  frozenAt?: string;
  reason?: string;
}

/** omap key of one snapshot's record (the object is per pool/namespace). */
export function ownerKey(image: string, snap: string): string {
  return `${image}@${snap}`;
}

export function parseOwnerKey(key: string): { image: string; snap: string } | null {
  const at = key.lastIndexOf('@');
  if (at <= 0 || at === key.length - 1) return null;
  return { image: key.slice(0, at), snap: key.slice(at + 1) };
}

export function encodeOwnerRecord(r: OwnerRecord): string {
  return JSON.stringify(r);
}

/** null for anything that is not a well-formed record (never acted on). */
export function decodeOwnerRecord(value: string): OwnerRecord | null {
  let v: unknown;
  try {
    v = JSON.parse(value);
  } catch {
    return null;
  }
  const r = v as Partial<OwnerRecord>;
  if (!r || typeof r !== 'object') return null;
  if (typeof r.workflowId !== 'string' || typeof r.namespace !== 'string' || typeof r.cluster !== 'string') return null;
  if (typeof r.recordedAt !== 'string' || (r.state !== 'pending' && r.state !== 'kept')) return null;
  return r as OwnerRecord;
}

/**
 * When the snapshot is absent, may the record go? Only when no late snapshot can still land:
 * the caller knows the request was answered or never sent (`lateMayLand` false), or the record
 * is older than `horizonMs` — the longest a stalled lock owner is assumed to sit on a queued
 * request before vmsnap stops watching for it.
 */
export function mayDropAbsent(r: OwnerRecord, o: { lateMayLand: boolean; now: number; horizonMs: number }): boolean {
  if (!o.lateMayLand) return true;
  const at = Date.parse(r.recordedAt);
  return Number.isFinite(at) && o.now - at > o.horizonMs;
}

export type ReaperAction = 'leave' | 'remove-snapshot' | 'drop-record' | 'keep-watching';

/**
 * The orphan reaper's decision on one record. It acts only on records of its own scope, of a
 * run that is no longer running, and never on a kept result. A present snapshot is removed (the
 * record goes once removal is confirmed); an absent one keeps its record until the horizon.
 */
export function reaperAction(
  r: OwnerRecord,
  o: { scope: RunScope; runOpen: boolean; snapExists: boolean; now: number; horizonMs: number },
): ReaperAction {
  if (r.namespace !== o.scope.namespace || r.cluster !== o.scope.cluster) return 'leave';
  if (r.state === 'kept' || o.runOpen) return 'leave';
  if (o.snapExists) return 'remove-snapshot';
  return mayDropAbsent(r, { lateMayLand: true, now: o.now, horizonMs: o.horizonMs }) ? 'drop-record' : 'keep-watching';
}
