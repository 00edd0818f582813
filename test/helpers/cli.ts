import { execFile } from 'node:child_process';
import path from 'node:path';
import { need } from '../../support/lab/env';

const BIN = path.resolve(__dirname, '../../bin/vmsnap.js');

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The lab's services as the CLI's environment; flags given to `vmsnapCli` override them. */
export function cliEnv(vars: Record<string, string>, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    VMSNAP_TEMPORAL_ADDRESS: need(vars, 'TEMPORAL_ADDRESS'),
    VMSNAP_TEMPORAL_NAMESPACE: vars.TEMPORAL_NAMESPACE ?? 'default',
    VMSNAP_LIBVIRT_URI: need(vars, 'LIBVIRT_DEFAULT_URI'),
    ...(vars.VMSNAP_LIBVIRT_STATUS_DIR ? { VMSNAP_LIBVIRT_STATUS_DIR: vars.VMSNAP_LIBVIRT_STATUS_DIR } : {}),
    VMSNAP_CEPH_CONF: need(vars, 'CEPH_CONF'),
    VMSNAP_CEPH_ID: vars.CEPH_VMSNAP_ID ?? 'admin',
    VMSNAP_CEPH_KEYRING: vars.CEPH_VMSNAP_KEYRING ?? need(vars, 'CEPH_KEYRING'),
    VMSNAP_STATE_DIR: path.join(vars.VMSNAP_LAB_DIR ?? '/tmp', 'cli-state'),
    ...extra,
  };
}

/** Runs the real CLI (`node bin/vmsnap.js ...argv`) as a child process; never throws on exit codes. */
export function vmsnapCli(argv: string[], env: NodeJS.ProcessEnv, timeoutMs = 170_000): Promise<CliRun> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...argv], { env, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      // -1: no exit code; say why (a signal, a timeout, too much output) so a failure explains itself.
      const why = err && code === -1 ? `\n[vmsnapCli: ${err.signal ? `killed by ${err.signal}` : String(err.code ?? err.message)}]` : '';
      resolve({ code, stdout, stderr: stderr + why, ms: Date.now() - t0 });
    });
  });
}

/** `--json` output of a successful run. */
export function json<T = Record<string, unknown>>(r: CliRun): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(`not JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
  }
}
