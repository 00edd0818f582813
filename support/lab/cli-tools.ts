/**
 * The lab's command-line tools, run with argv arrays (no shell) and a time limit: `virsh` against
 * the lab's libvirtd and `rbd` against the lab's Ceph. For tests and benchmarks that need an
 * independent view of the system (not vmsnap's own adapters).
 */
import { execFile } from 'node:child_process';
import type { LabEnv } from './env';

export interface CliResult {
  readonly stdout: string;
  readonly stderr: string;
}

export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(message);
  }
}

export function run(cmd: string, args: readonly string[], timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        const code = typeof err.code === 'number' ? err.code : null;
        reject(new CliError(`${cmd} ${args.join(' ')}: ${stderr.trim() || err.message}`, code, stderr));
      } else {
        resolve({ stdout, stderr });
      }
    });
  });
}

/** `virsh -c <lab uri> ...args`. */
export function virsh(env: LabEnv, args: readonly string[], timeoutMs?: number): Promise<CliResult> {
  if (!env.libvirt) throw new Error('the lab env has no libvirt (run npm run lab:up)');
  return run('virsh', ['-c', env.libvirt.uri, ...args], timeoutMs);
}

/** `rbd -c <conf> --id admin --keyring <admin keyring> ...args`. */
export function rbd(env: LabEnv, args: readonly string[], timeoutMs?: number): Promise<CliResult> {
  return run('rbd', ['-c', env.ceph.conf, '--id', env.ceph.adminId, '--keyring', env.ceph.adminKeyring, ...args], timeoutMs);
}

/** A QEMU guest agent command through libvirt (`virsh qemu-agent-command`), parsed. */
export async function agentCommand(env: LabEnv, domain: string, execute: string, timeoutS = 10): Promise<unknown> {
  const { stdout } = await virsh(env, ['qemu-agent-command', '--timeout', String(timeoutS), domain, JSON.stringify({ execute })]);
  return (JSON.parse(stdout) as { return: unknown }).return;
}
