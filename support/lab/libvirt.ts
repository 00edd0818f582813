/**
 * What the libvirt integration tests and the latency bench need from the lab: its libvirtd and
 * guests, and the guest/libvirtd control scripts.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { LabNotUpError, loadLabEnv } from './env';

const run = promisify(execFile);
const REPO = path.resolve(__dirname, '../..');

export interface LibvirtLab {
  socket: string;
  uri: string;
  guest1: string;
  guest3: string;
  guestNoAgent: string;
}

/** The libvirt part of the lab env. */
export function loadLibvirtLab(): LibvirtLab {
  const { libvirt, guests } = loadLabEnv();
  if (!libvirt || !guests) throw new LabNotUpError('the lab runs without libvirt or guests: npm run lab:up');
  return { socket: libvirt.socket, uri: libvirt.uri, guest1: guests.oneDisk, guest3: guests.threeDisk, guestNoAgent: guests.noAgent };
}

/** lab/guest-ctl.sh <guest> <command> (hang-agent, resume-agent, status, ...). */
export async function guestCtlScript(guest: string, command: string): Promise<string> {
  const { stdout } = await run('bash', [path.join(REPO, 'lab/guest-ctl.sh'), guest, command], { timeout: 30_000 });
  return stdout.trim();
}

/** lab/libvirt.sh kill|start: SIGKILL libvirtd (QEMUs keep running) and start it again. */
export async function libvirtd(command: 'kill' | 'start'): Promise<void> {
  await run('bash', [path.join(REPO, 'lab/libvirt.sh'), command], { timeout: 60_000 });
}
