import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { RestorePoint } from '../model/restore-point';

/*
 * The MAC on a restore record: HMAC-SHA256, with the fleet's restore key, over every field of the
 * record that a restore acts on — the run, the domain, the disk list (target, image, source) and
 * the recorded definition — in one fixed encoding. Anyone who can write image metadata in the
 * images pool can write a record; only a holder of the key (the workers) can write one that
 * verifies. Pure.
 */

export const MAC_ALG = 'hmac-sha256';

/** A key's public name: the first 16 hex of its SHA-256, so "signed with another key" can be told apart. */
export function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

function signedBytes(p: Omit<RestorePoint, 'mac'>): string {
  // Fixed order, so a re-encoding of the same record gives the same bytes.
  return JSON.stringify([
    p.v, p.workflowId, p.runId, p.domain.name, p.domain.uuid, p.quiesced, p.recordedAt,
    p.disks.map((d) => [d.target, d.image, d.source]), p.domainXml,
  ]);
}

/** `hmac-sha256:<key id>:<hex>` over the record. */
export function restorePointMac(p: Omit<RestorePoint, 'mac'>, key: Buffer): string {
  return `${MAC_ALG}:${keyId(key)}:${createHmac('sha256', key).update(signedBytes(p)).digest('hex')}`;
}

export type MacVerdict = { ok: true } | { ok: false; why: string };

export function verifyRestorePointMac(p: RestorePoint, key: Buffer): MacVerdict {
  if (!p.mac) return { ok: false, why: 'it carries no MAC (written before records were signed, or not by vmsnap)' };
  const [alg, id, value] = p.mac.split(':');
  if (alg !== MAC_ALG || !id || !value) return { ok: false, why: `its MAC is not ${MAC_ALG}` };
  if (id !== keyId(key)) return { ok: false, why: `it was signed with another restore key (${id}; this worker's is ${keyId(key)})` };
  const want = Buffer.from(restorePointMac(p, key).split(':')[2]!, 'hex');
  const got = Buffer.from(value, 'hex');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return { ok: false, why: 'its MAC does not match its contents (altered after vmsnap wrote it)' };
  return { ok: true };
}
