import { readFile, stat } from 'node:fs/promises';
import { keyId } from '../restore/record-mac';

/*
 * The fleet's restore-record key: one file, the same bytes on every host of the fleet
 * (`VMSNAP_RESTORE_KEY_FILE`, default /etc/vmsnap/restore.key), readable by the worker only.
 * Read on every use, so a key installed after the worker started is used without a restart.
 */

export const DEFAULT_RESTORE_KEY_FILE = '/etc/vmsnap/restore.key';

export type RestoreKey = { ok: true; file: string; key: Buffer; id: string } | { ok: false; file: string; why: string };

/** The fix an operator needs, for messages. */
export function restoreKeyFix(file: string): string {
  return `create it once (umask 077; openssl rand -hex 32 > ${file}) and copy the same file, mode 0600, to every host of the fleet`;
}

export async function readRestoreKey(file: string): Promise<RestoreKey> {
  let mode: number;
  try {
    mode = (await stat(file)).mode;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { ok: false, file, why: `no restore key at ${file}` };
    return { ok: false, file, why: `restore key ${file} unreadable: ${(err as Error).message}` };
  }
  // A key others can read is a key anyone on the host can sign planted records with.
  if (mode & 0o077) return { ok: false, file, why: `restore key ${file} is mode ${(mode & 0o777).toString(8)}: it must be 0600 (readable by the worker only)` };
  const key = Buffer.from((await readFile(file, 'utf8')).trim(), 'utf8');
  if (key.length < 32) return { ok: false, file, why: `restore key ${file} is ${key.length} bytes: at least 32 are needed` };
  return { ok: true, file, key, id: keyId(key) };
}
