import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';

/*
 * The key that signs restore records (src/restore/record-mac.ts). Every worker of a fleet needs
 * the same one (a record written on one host is restored on another), and nothing but workers may
 * hold it. Two sources, in this order:
 *
 *  1. `restoreRecordKeyFile` (VMSNAP_RESTORE_RECORD_KEY_FILE): a file with at least 32 characters
 *     of secret (e.g. `openssl rand -hex 32`), readable by the worker only.
 *  2. Otherwise derived from the worker's own cephx secret (`client.<ceph.id>` in its keyring):
 *     HMAC-SHA256(secret, "vmsnap restore-record key v1"). Every worker already holds that key
 *     and the images pool's other clients (Glance, an operator's client.admin aside) do not.
 *     Rotating that cephx key makes records written before untrusted unless the old key is kept
 *     as a key file.
 */

export interface RestoreKeySource {
  keyFile?: string;
  ceph: { conf: string; id: string; keyring?: string };
}

export class RestoreKeyError extends Error {
  override name = 'RestoreKeyError';
}

export async function loadRestoreRecordKey(src: RestoreKeySource): Promise<Buffer> {
  if (src.keyFile) {
    const secret = (await readOrThrow(src.keyFile, 'restoreRecordKeyFile')).trim();
    if (secret.length < 32) throw new RestoreKeyError(`restoreRecordKeyFile ${src.keyFile} holds ${secret.length} characters; at least 32 are needed`);
    return Buffer.from(secret, 'utf8');
  }
  const entity = `client.${src.ceph.id}`;
  for (const file of await keyringCandidates(src.ceph, entity)) {
    const text = await readFile(file, 'utf8').catch(() => undefined);
    const secret = text === undefined ? undefined : cephxSecretOf(text, entity);
    if (secret) return createHmac('sha256', Buffer.from(secret, 'base64')).update('vmsnap restore-record key v1').digest();
  }
  throw new RestoreKeyError(`no restore-record key: set restoreRecordKeyFile, or give the worker its cephx keyring with a key for ${entity}`);
}

/** The `key = …` of `[entity]` in a cephx keyring. */
export function cephxSecretOf(keyring: string, entity: string): string | undefined {
  let inSection = false;
  for (const raw of keyring.split('\n')) {
    const line = raw.trim();
    const section = /^\[(.+)\]$/.exec(line);
    if (section) inSection = section[1].trim() === entity;
    else if (inSection) {
      const m = /^key\s*=\s*(\S+)$/.exec(line);
      if (m) return m[1];
    }
  }
  return undefined;
}

/** The keyring librados would use: the configured one, ceph.conf's `keyring =`, then its defaults. */
async function keyringCandidates(ceph: RestoreKeySource['ceph'], entity: string): Promise<string[]> {
  if (ceph.keyring) return [ceph.keyring];
  const conf = (await readFile(ceph.conf, 'utf8').catch(() => '')).split('\n');
  const fromConf = conf.map((l) => /^\s*keyring\s*=\s*(\S+)\s*$/.exec(l)?.[1]).filter((k): k is string => !!k);
  const expand = (p: string) => p.replace(/\$cluster/g, 'ceph').replace(/\$name/g, entity);
  return [...fromConf.map(expand), `/etc/ceph/ceph.${entity}.keyring`, '/etc/ceph/ceph.keyring', '/etc/ceph/keyring'];
}

async function readOrThrow(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new RestoreKeyError(`cannot read ${what} ${file}: ${(err as Error).message}`);
  }
}
