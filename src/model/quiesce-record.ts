/**
 * What a finished image (or kept snapshot) records about how it was made, and what a later run of
 * the same workflow id may report from it. A reset or re-run that finds the work done did not
 * freeze anything itself: its `quiesced` is only as true as this record, so a missing or
 * inconsistent record is reported as not quiesced, with the reason.
 */

/** Written by finalize on every disk's result (image metadata, or the kept snapshot's done marker). */
export interface QuiesceRecord {
  quiesced: boolean;
  frozenFilesystems: number;
  /** ISO time the freeze call started (worker clock); identifies the freeze across disks. */
  frozenAt?: string;
  reason?: string;
}

/** One disk's record as found; undefined when the disk carries none (finalized by an older vmsnap). */
export interface FoundRecord {
  target: string;
  record?: QuiesceRecord;
}

export interface ReusedQuiesce {
  quiesced: boolean;
  quiesceReason: string;
  frozenFilesystems: number;
  frozenAt?: string;
}

/** Image metadata values (`rbd image-meta`) → record; undefined when `quiesced` was never written. */
export function recordFromMeta(get: (key: string) => string | null | undefined, keys: { quiesced: string; frozenFilesystems: string; frozenAt: string; reason: string }): QuiesceRecord | undefined {
  const q = get(keys.quiesced);
  if (q !== 'true' && q !== 'false') return undefined;
  const n = Number(get(keys.frozenFilesystems) ?? NaN);
  const frozenAt = get(keys.frozenAt) ?? undefined;
  const reason = get(keys.reason) ?? undefined;
  return {
    quiesced: q === 'true',
    frozenFilesystems: Number.isInteger(n) && n >= 0 ? n : -1,
    ...(frozenAt ? { frozenAt } : {}),
    ...(reason ? { reason } : {}),
  };
}

/** A kept snapshot's owner record (decoded JSON) → record. */
export function recordFromObject(v: unknown): QuiesceRecord | undefined {
  if (!v || typeof v !== 'object') return undefined;
  const o = v as Record<string, unknown>;
  const get = (k: string) => (o[k] === undefined || o[k] === null ? undefined : String(o[k]));
  return recordFromMeta(get, { quiesced: 'quiesced', frozenFilesystems: 'frozenFilesystems', frozenAt: 'frozenAt', reason: 'reason' });
}

/**
 * The reused result's quiesce state: true only when every disk records the same freeze (same
 * start time, same filesystem count) — the disks of one consistent snapshot.
 */
export function reusedQuiesce(found: FoundRecord[]): ReusedQuiesce {
  const no = (why: string): ReusedQuiesce => ({ quiesced: false, quiesceReason: `reused earlier images: ${why}`, frozenFilesystems: 0 });
  if (found.length === 0) return no('no disk to read a record from');
  const missing = found.filter((f) => !f.record).map((f) => f.target);
  if (missing.length) return no(`${missing.join(', ')} record(s) no quiesce state (finalized before vmsnap recorded it)`);
  const records = found.map((f) => ({ target: f.target, ...f.record! }));
  const unquiesced = records.find((r) => !r.quiesced);
  if (unquiesced) {
    const mixed = records.some((r) => r.quiesced) ? ' (other disks record quiesced: inconsistent)' : '';
    return no(`${unquiesced.target} records a snapshot that was not quiesced${unquiesced.reason ? `: ${unquiesced.reason}` : ''}${mixed}`);
  }
  const noTime = records.filter((r) => !r.frozenAt || r.frozenFilesystems < 1).map((r) => r.target);
  if (noTime.length) return no(`${noTime.join(', ')} record(s) quiesced but no freeze time or filesystem count`);
  const first = records[0];
  const other = records.find((r) => r.frozenAt !== first.frozenAt || r.frozenFilesystems !== first.frozenFilesystems);
  if (other) {
    return no(
      `disks record different freezes (${first.target}: ${first.frozenFilesystems} at ${first.frozenAt}; ` +
        `${other.target}: ${other.frozenFilesystems} at ${other.frozenAt}), not one consistent snapshot`,
    );
  }
  return {
    quiesced: true,
    quiesceReason: `reused earlier images of this workflow id: they record that the guest agent froze ${first.frozenFilesystems} filesystem(s) at ${first.frozenAt} for the snapshot`,
    frozenFilesystems: first.frozenFilesystems,
    frozenAt: first.frozenAt,
  };
}
