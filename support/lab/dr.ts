/**
 * The lab's DR site for the tests and benchmarks that need it: `lab/dr.sh up` (idempotent: about a
 * second when it runs, ~13 s from nothing) and its keys. Left running afterwards: it is cheap idle
 * (docs/lab.md#the-dr-site) and another test file may use it; lab:down takes it down.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run, virsh } from './cli-tools';
import { defaultLabDir, loadLabDrEnv, type LabDrEnv, type LabEnv } from './env';

export async function drSiteUp(): Promise<LabDrEnv> {
  const script = path.join(__dirname, '..', '..', 'lab', 'dr.sh');
  await run('bash', [script, 'up'], 180_000);
  return loadLabDrEnv(defaultLabDir());
}

/** `rbd` against the DR cluster as its admin. */
export function drRbd(dr: LabDrEnv, args: readonly string[], timeoutMs?: number): ReturnType<typeof run> {
  return run('rbd', ['-c', dr.conf, '--id', dr.adminId, '--keyring', dr.adminKeyring, ...args], timeoutMs);
}

/** The libvirt ceph secret of the DR cluster's client.qemu on lab host A (one UUID, as the lab cluster's). */
export const DR_QEMU_SECRET_UUID = '8d2f6c1e-3b7a-4e59-9a0d-d05a17e0c0de';
export const DR_QEMU_ID = 'qemu';

/**
 * What a hypervisor attached to the DR cluster needs for its QEMU to open disks there (what the
 * lab's guests.sh does for the lab cluster): client.qemu on the DR cluster (rbd on the DR pool)
 * and its key in a libvirt ceph secret on host A. Idempotent; the key goes through a 0600 file.
 */
export async function drQemuSecret(env: LabEnv, dr: LabDrEnv): Promise<{ uuid: string; user: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-dr-secret-'));
  try {
    const key = (
      await run('ceph', ['-c', dr.conf, '--id', dr.adminId, '--keyring', dr.adminKeyring, 'auth', 'get-or-create-key', `client.${DR_QEMU_ID}`, 'mon', 'profile rbd', 'osd', `profile rbd pool=${dr.pool}`], 30_000)
    ).stdout.trim();
    const keyFile = path.join(dir, 'key');
    writeFileSync(keyFile, key, { mode: 0o600 });
    const xml = path.join(dir, 'secret.xml');
    writeFileSync(
      xml,
      `<secret ephemeral='no' private='yes'><uuid>${DR_QEMU_SECRET_UUID}</uuid><usage type='ceph'><name>client.${DR_QEMU_ID} (vmsnap lab DR site)</name></usage></secret>\n`,
    );
    await virsh(env, ['secret-define', xml]);
    await virsh(env, ['secret-set-value', DR_QEMU_SECRET_UUID, '--file', keyFile]);
    return { uuid: DR_QEMU_SECRET_UUID, user: DR_QEMU_ID };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
