import { createHmac, timingSafeEqual } from 'node:crypto';

/*
 * The restore record (src/model/restore-point.ts) is trusted only if vmsnap wrote it: a worker
 * adds `mac`, an HMAC-SHA256 over the rest of the record with the fleet's restore-record key
 * (src/host/restore-record-key.ts), and a restore verifies it before it plans anything. Anyone
 * who can write image metadata without that key (the images pool's other clients) cannot make a
 * record a worker will act on.
 */

const CONTEXT = 'vmsnap.restore-point\n';

function macOf(body: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(CONTEXT).update(body).digest();
}

/** `value` (a record as encodeRestorePoint writes it) with its `mac`. */
export function signRestoreRecord(value: string, key: Buffer): string {
  const { mac: _old, ...rest } = JSON.parse(value) as Record<string, unknown>;
  return JSON.stringify({ ...rest, mac: macOf(JSON.stringify(rest), key).toString('hex') });
}

export type RecordTrust = { trusted: true } | { trusted: false; why: string };

/** Whether `value` carries a `mac` made with `key` over exactly the rest of it. */
export function verifyRestoreRecord(value: string | null | undefined, key: Buffer): RecordTrust {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(value ?? '') as Record<string, unknown>;
  } catch {
    return { trusted: false, why: 'the record is not JSON' };
  }
  if (typeof parsed !== 'object' || parsed === null) return { trusted: false, why: 'the record is not an object' };
  const { mac, ...rest } = parsed;
  if (typeof mac !== 'string') return { trusted: false, why: 'the record carries no mac (not written by a vmsnap worker of this release, or planted)' };
  if (!/^[0-9a-f]{64}$/.test(mac)) return { trusted: false, why: 'the record’s mac is malformed' };
  const want = macOf(JSON.stringify(rest), key);
  if (!timingSafeEqual(want, Buffer.from(mac, 'hex'))) {
    return { trusted: false, why: 'the record’s mac does not match (altered, planted, or written with another restore-record key)' };
  }
  return { trusted: true };
}
