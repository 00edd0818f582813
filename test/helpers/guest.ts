import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { need } from '../../support/lab/env';

const run = promisify(execFile);

/** Observes a guest through `virsh` (not vmsnap's own client), for independent assertions. */
export async function virsh(vars: Record<string, string>, ...args: string[]): Promise<string> {
  const { stdout } = await run('virsh', ['-q', '-c', need(vars, 'LIBVIRT_DEFAULT_URI'), ...args], { timeout: 30_000 });
  return stdout.trim();
}

export async function freezeStatus(vars: Record<string, string>, domain: string): Promise<string> {
  const out = await virsh(vars, 'qemu-agent-command', domain, '{"execute":"guest-fsfreeze-status"}');
  return (JSON.parse(out) as { return: string }).return;
}

/** Thaws a guest that a failed test may have left frozen, so the next test starts clean. */
export async function ensureThawed(vars: Record<string, string>, domain: string): Promise<void> {
  await virsh(vars, 'domfsthaw', domain).catch(() => undefined);
}
