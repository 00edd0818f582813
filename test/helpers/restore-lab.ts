import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { CephView } from './ceph-inspect';
import { virsh } from './guest';
import { need } from '../../support/lab/env';

const run = promisify(execFile);

/** The probe's log on an RBD image or snapshot (`rbd export` to a file, `debugfs cat probe.log`). */
export async function probeLogOf(ceph: CephView, spec: string): Promise<{ seq: number; t: string }[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-probe-'));
  const file = path.join(dir, 'disk.raw');
  try {
    await ceph.rbd('export', '--no-progress', spec, file);
    const { stdout } = await run('debugfs', ['-R', 'cat /probe.log', file], { maxBuffer: 64 << 20 });
    return stdout
      .split('\n')
      .map((l) => l.trim().split(' '))
      .filter((p) => p.length === 2 && /^\d+$/.test(p[0]))
      .map(([seq, t]) => ({ seq: Number(seq), t }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function domState(vars: Record<string, string>, domain: string): Promise<string> {
  return virsh(vars, 'domstate', domain).catch(() => 'absent');
}

export async function inactiveXml(vars: Record<string, string>, domain: string): Promise<string> {
  return virsh(vars, 'dumpxml', '--inactive', domain);
}

export async function agentAnswers(vars: Record<string, string>, domain: string): Promise<boolean> {
  return virsh(vars, 'qemu-agent-command', domain, '{"execute":"guest-ping"}').then(
    () => true,
    () => false,
  );
}

/** Removes a VM a test made: destroy, undefine, then its disks (by name, with the admin key). */
export async function removeVm(vars: Record<string, string>, ceph: CephView, domain: string, disks: string[]): Promise<void> {
  await virsh(vars, 'destroy', domain).catch(() => undefined);
  await virsh(vars, 'undefine', domain).catch(() => undefined);
  for (const d of disks) {
    const [pool, image] = d.split('/') as [string, string];
    await ceph.removeImage(pool, image);
  }
}

/** lab/guests.sh up: starts every lab guest that is not running and waits until it is ready. */
export async function labGuestsUp(vars: Record<string, string>): Promise<void> {
  const root = path.resolve(__dirname, '../..');
  await run('bash', [path.join(root, 'lab/guests.sh'), 'up'], {
    env: { ...process.env, LAB_DIR: need(vars, 'VMSNAP_LAB_DIR') },
    timeout: 400_000,
  });
}

/** lab/guests.sh recreate GUEST: a fresh guest with fresh disks, as lab:up makes it. */
export async function labGuestRecreate(vars: Record<string, string>, guest: string): Promise<void> {
  const root = path.resolve(__dirname, '../..');
  const guests = (...args: string[]) =>
    run('bash', [path.join(root, 'lab/guests.sh'), ...args], { env: { ...process.env, LAB_DIR: need(vars, 'VMSNAP_LAB_DIR') }, timeout: 400_000 });
  // guests.sh waits 90 s for readiness; a heavily loaded host boots the TCG guest slower than that.
  await guests('recreate', guest).catch(() => guests('ready', guest).catch(() => guests('ready', guest)));
}

/** Runs argv in the guest through its agent (guest-exec) and waits for it: exit code and output. */
export async function guestExec(vars: Record<string, string>, domain: string, argv: string[], stdin?: string): Promise<{ code: number; out: string }> {
  const [file, ...args] = argv as [string, ...string[]];
  const input = stdin === undefined ? {} : { 'input-data': Buffer.from(stdin).toString('base64') };
  const started = JSON.parse(
    await virsh(vars, 'qemu-agent-command', domain, JSON.stringify({ execute: 'guest-exec', arguments: { path: file, arg: args, 'capture-output': true, ...input } })),
  ) as { return: { pid: number } };
  for (let t0 = Date.now(); Date.now() - t0 < 30_000; await new Promise((r) => setTimeout(r, 200))) {
    const s = JSON.parse(
      await virsh(vars, 'qemu-agent-command', domain, JSON.stringify({ execute: 'guest-exec-status', arguments: { pid: started.return.pid } })),
    ) as { return: { exited: boolean; exitcode?: number; 'out-data'?: string; 'err-data'?: string } };
    if (!s.return.exited) continue;
    const text = (b?: string) => (b ? Buffer.from(b, 'base64').toString() : '');
    return { code: s.return.exitcode ?? -1, out: text(s.return['out-data']) + text(s.return['err-data']) };
  }
  throw new Error(`${argv.join(' ')} did not exit in ${domain} within 30 s`);
}

/*
 * qemu-ga's guest-shutdown runs `/sbin/shutdown -h -P +0`; the lab's initramfs has no such
 * program, so its guests ignore every shutdown request (agent and ACPI alike). This one stops the
 * probe, unmounts the data disks and powers off — after replying, so the agent's answer arrives.
 */
const SHUTDOWN_SCRIPT = `#!/bin/sh
( sleep 1; PATH=/bin:/usr/local/bin; probe stop; sync
  for m in /mnt/*; do umount "$m" || mount -o remount,ro "$m"; done
  poweroff -f ) </dev/null >/dev/null 2>&1 &
`;

/** Makes a running lab guest power off on a graceful shutdown request (until it next boots). */
export async function teachGuestToPowerOff(vars: Record<string, string>, domain: string): Promise<void> {
  const r = await guestExec(vars, domain, ['/bin/sh', '-c', 'mkdir -p /sbin && cat > /sbin/shutdown && chmod +x /sbin/shutdown'], SHUTDOWN_SCRIPT);
  if (r.code !== 0) throw new Error(`installing /sbin/shutdown failed: ${r.out}`);
}

/** Back to the lab image's behaviour: shutdown requests are ignored. */
export async function guestIgnoresShutdown(vars: Record<string, string>, domain: string): Promise<void> {
  const r = await guestExec(vars, domain, ['/bin/rm', '-f', '/sbin/shutdown']);
  if (r.code !== 0) throw new Error(`removing /sbin/shutdown failed: ${r.out}`);
}
