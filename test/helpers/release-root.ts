import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/*
 * The release as an operator meets it: the tarball `npm run release` makes, installed with npm
 * into a clean Debian 12 root (lab/release-root.sh) that has Node, librbd1/librados2 and
 * ceph-common and no build tools, and run there (lab/in-root.sh).
 */
const ROOT = path.resolve(__dirname, '../..');

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

function run(file: string, argv: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Run> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(file, argv, { cwd: ROOT, env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 180_000, maxBuffer: 32 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      const why = err && code === -1 ? `\n[${path.basename(file)}: ${err.signal ? `killed by ${err.signal}` : String(err.code ?? err.message)}]` : '';
      resolve({ code, stdout, stderr: stderr + why, ms: Date.now() - t0 });
    });
  });
}

function lastLine(r: Run, what: string): string {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}:\n${r.stderr}`);
  return r.stdout.trim().split('\n').pop()!;
}

/** The release tarball (`npm run release`, cached by source hash), or VMSNAP_RELEASE_TGZ's. */
export async function releaseTarball(): Promise<{ tgz: string; ms: number }> {
  if (process.env.VMSNAP_RELEASE_TGZ) return { tgz: path.resolve(process.env.VMSNAP_RELEASE_TGZ), ms: 0 };
  const r = await run(process.execPath, [path.join(ROOT, 'scripts', 'release.mjs')], { timeoutMs: 900_000 });
  return { tgz: lastLine(r, 'scripts/release.mjs'), ms: r.ms };
}

/** The clean Debian 12 root (cached under VMSNAP_CACHE; minutes cold, milliseconds warm). */
export async function releaseRoot(): Promise<{ root: string; ms: number }> {
  const r = await run('bash', [path.join(ROOT, 'lab', 'release-root.sh')], { timeoutMs: 1_800_000 });
  return { root: lastLine(r, 'lab/release-root.sh'), ms: r.ms };
}

/** Host directories every command in the root sees at their own path. */
export interface RootMounts {
  root: string;
  dirs: string[];
}

/** Runs argv inside the root (lab/in-root.sh): exit code and output, never throws on a code. */
export function inRoot(m: RootMounts, argv: string[], env: Record<string, string> = {}, timeoutMs = 180_000): Promise<Run> {
  return run('bash', [path.join(ROOT, 'lab', 'in-root.sh'), m.root, ...m.dirs, '--', ...argv], { env: { ...process.env, ...env }, timeoutMs });
}

/**
 * A long-running command inside the root (the worker). Stop it with SIGKILL: the process is
 * unshare, which ignores SIGTERM in its fork mode and, dying, sends SIGTERM to the command.
 */
export function spawnInRoot(m: RootMounts, argv: string[], env: Record<string, string>): ChildProcess {
  return spawn('bash', [path.join(ROOT, 'lab', 'in-root.sh'), m.root, ...m.dirs, '--', ...argv], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/**
 * Installs the tarball in the root as an operator would (`npm install -g` with the root's own Node
 * and npm, no build tools there), once per tarball: the prefix is named after it. Returns the
 * prefix inside the root (its bin/vmsnap is the command), and the install's time (0 when cached).
 */
export async function installRelease(m: RootMounts, tgz: string): Promise<{ prefix: string; ms: number; log: string }> {
  const name = path.basename(tgz, '.tgz');
  const prefix = `/opt/${name}`;
  const done = path.join(m.root, prefix, '.installed');
  if (existsSync(done)) return { prefix, ms: 0, log: '' };
  mkdirSync(path.join(m.root, 'opt', 'pkgs'), { recursive: true });
  copyFileSync(tgz, path.join(m.root, 'opt', 'pkgs', `${name}.tgz`));
  const r = await inRoot(m, ['npm', 'install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', '--omit=dev', `/opt/pkgs/${name}.tgz`], {}, 900_000);
  if (r.code !== 0) throw new Error(`npm install of ${name} in the clean root exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
  writeFileSync(done, `${new Date().toISOString()}\n`);
  return { prefix, ms: r.ms, log: r.stdout + r.stderr };
}
