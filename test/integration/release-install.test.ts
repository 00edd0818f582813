import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotResult } from '../../src/model/types';
import { VERSION } from '../../src/version';
import { CephView } from '../helpers/ceph-inspect';
import { cliEnv } from '../helpers/cli';
import { ensureThawed } from '../helpers/guest';
import { uniqueId } from '../helpers/harness';
import { inRoot, installRelease, releaseRoot, releaseTarball, spawnInRoot } from '../helpers/release-root';
import type { RootMounts } from '../helpers/release-root';
import { quiescedTruthViolations } from '../helpers/truth';
import { labVars, need } from '../../support/lab/env';

/*
 * The release as an operator installs it: `npm run release`'s tarball, `npm install -g` into a
 * clean Debian 12 root (mmdebstrap: Node 22 LTS, librbd1, librados2, ceph-common; no compiler, no
 * make, no -dev package), then from inside that root `vmsnap --version`, `vmsnap doctor`, and a
 * quiesced `vmsnap snapshot` served by a `vmsnap worker` that also runs there, so the snapshot
 * goes through the installed compiled code and the prebuilt addon. A tarball that compiles at
 * install, needs a devDependency (tsx) or lacks its prebuilt addon fails here.
 * VMSNAP_RELEASE_TGZ=<file> runs the same checks on another tarball.
 */
const NODE_LTS = 'v22.';
let vars: Record<string, string>;
let g1: string;
let mounts: RootMounts;
let prefix: string;
let worker: ChildProcess | undefined;
const workerLog: string[] = [];
const host = uniqueId('release');
const timings: Record<string, number> = {};

const vmsnap = () => `${prefix}/bin/vmsnap`;
const pkgDir = () => path.join(mounts.root, prefix, 'lib', 'node_modules', 'vmsnap');

/** The lab's services as the CLI inside the root sees them (the lab dir is mounted at its path; in-root.sh passes only VMSNAP_* and TEMPORAL_*). */
function env(): Record<string, string> {
  return cliEnv(vars, { VMSNAP_STATE_DIR: '/tmp/vmsnap-state', VMSNAP_HOST: host, VMSNAP_METRICS_PORT: '0' }) as Record<string, string>;
}

beforeAll(async () => {
  vars = labVars();
  g1 = need(vars, 'VMSNAP_GUEST_1DISK');
  const [artifact, root] = await Promise.all([releaseTarball(), releaseRoot()]);
  timings.artifactMs = artifact.ms;
  timings.rootMs = root.ms;
  mounts = { root: root.root, dirs: [need(vars, 'VMSNAP_LAB_DIR')] };
  const installed = await installRelease(mounts, artifact.tgz);
  timings.installMs = installed.ms;
  prefix = installed.prefix;
}, 2_400_000);

afterAll(async () => {
  worker?.kill('SIGKILL');
  if (vars && g1) await ensureThawed(vars, g1);
  console.log(`release install test timings (ms): ${JSON.stringify(timings)}`);
});

describe('the release installed in a clean Debian 12 root', () => {
  it('the root has no compiler, no make, no -dev package and no Node headers', () => {
    // gcc-12-base (copyright files of libgcc/libstdc++, essential) is not a compiler.
    for (const tool of ['cc', 'gcc', 'g++', 'c++', 'make', 'ld']) {
      for (const dir of ['usr/bin', 'usr/local/bin']) expect(existsSync(path.join(mounts.root, dir, tool)), `${dir}/${tool}`).toBe(false);
    }
    for (const dir of ['usr/include/rados', 'usr/include/rbd', 'usr/include/node', 'usr/local/include/node']) {
      expect(existsSync(path.join(mounts.root, dir)), dir).toBe(false);
    }
    const packages = [...readFileSync(path.join(mounts.root, 'var/lib/dpkg/status'), 'utf8').matchAll(/^Package: (\S+)$/gm)].map((m) => m[1]);
    expect(packages).toEqual(expect.arrayContaining(['librbd1', 'librados2', 'ceph-common']));
    expect(packages.filter((p) => /-dev$|^(gcc|g\+\+|cpp)(-[0-9.]+)?$|^(make|binutils)(-|$)/.test(p))).toEqual([]);
  });

  it('the installed package holds compiled code, the prebuilt addon and runtime dependencies only', () => {
    const manifest = JSON.parse(readFileSync(path.join(pkgDir(), 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest.scripts, 'no install/prepare script: nothing compiles on the host').toBeUndefined();
    expect(manifest.devDependencies).toBeUndefined();
    expect(existsSync(path.join(pkgDir(), 'prebuilds', 'linux-x64-glibc', 'vmsnap_rbd.node'))).toBe(true);
    expect(existsSync(path.join(pkgDir(), 'dist', 'src', 'cli', 'main.js'))).toBe(true);
    expect(existsSync(path.join(pkgDir(), 'src')), 'no TypeScript sources to fall back to').toBe(false);
    expect(existsSync(path.join(pkgDir(), 'build')), 'no node-gyp build output').toBe(false);
    const modules = path.join(pkgDir(), 'node_modules');
    const installed = existsSync(modules) ? readdirSync(modules) : readdirSync(path.join(mounts.root, prefix, 'lib', 'node_modules'));
    for (const dev of ['typescript', 'tsx', 'vitest', 'node-gyp', 'node-addon-api', 'eslint', '@temporalio/testing']) {
      expect(existsSync(path.join(modules, dev)), dev).toBe(false);
    }
    expect(installed).toEqual(expect.arrayContaining(['@temporalio', 'protobufjs', 'zod']));
  });

  it('vmsnap --version runs on the root\'s Node LTS', async () => {
    const node = await inRoot(mounts, ['node', '--version']);
    expect(node.stdout.trim().startsWith(NODE_LTS), node.stdout).toBe(true);
    const r = await inRoot(mounts, [vmsnap(), '--version']);
    timings.versionMs = r.ms;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(VERSION);
  });

  it('a worker runs there, vmsnap doctor is OK for this host, and a snapshot is quiesced', async () => {
    // Without its addon an install cannot serve; say so now, not at the start timeout below.
    expect(existsSync(path.join(pkgDir(), 'prebuilds', 'linux-x64-glibc', 'vmsnap_rbd.node')), 'the prebuilt addon is installed').toBe(true);
    const t0 = Date.now();
    worker = spawnInRoot(mounts, [vmsnap(), 'worker'], env());
    await new Promise<void>((resolve, reject) => {
      const late = setTimeout(() => reject(new Error(`the worker in the root did not start in 90 s:\n${workerLog.join('')}`)), 90_000);
      worker!.once('exit', () => clearTimeout(late));
      const onData = (b: Buffer) => {
        workerLog.push(b.toString());
        if (workerLog.join('').includes('"worker started"')) {
          clearTimeout(late);
          resolve();
        }
      };
      worker!.stdout!.on('data', onData);
      worker!.stderr!.on('data', onData);
      worker!.once('exit', (code) => reject(new Error(`the worker in the root exited ${code}:\n${workerLog.join('')}`)));
    });
    timings.workerStartMs = Date.now() - t0;

    const doctor = await inRoot(mounts, [vmsnap(), 'doctor', '--host', host, '--domain', g1, '--json'], env());
    timings.doctorMs = doctor.ms;
    const checks = (JSON.parse(doctor.stdout) as { checks: { name: string; status: string; detail: string }[] }).checks;
    // Every check of this host is OK; fleet.* lines are other hosts' heartbeats (an earlier run's
    // worker is LOST there, a WARN), not this installation's.
    expect(checks.filter((c) => !c.name.startsWith('fleet.') && c.status !== 'ok'), doctor.stdout).toEqual([]);
    expect(checks.map((c) => c.name)).toEqual(expect.arrayContaining(['ceph', `ceph pool ${need(vars, 'VMSNAP_VM_POOL')}`, 'libvirt', `domain ${g1} agent`, 'temporal.worker']));
    expect(doctor.code, doctor.stderr).toBe(0);

    const snap = await inRoot(mounts, [vmsnap(), 'snapshot', g1, '--host', host, '--quiesce', 'require', '--workflow-id', uniqueId('release'), '--wait', '--json'], env());
    timings.snapshotMs = snap.ms;
    expect(snap.code, `${snap.stderr}\n${workerLog.join('')}`).toBe(0);
    const result = JSON.parse(snap.stdout) as SnapshotResult;
    expect(result.quiesced).toBe(true);
    expect(await quiescedTruthViolations(vars, result)).toEqual([]);
    await new CephView(vars).removeResultImages(result);

    // Decommissioning, as the operator does it: stop the worker (unshare passes SIGTERM on: a
    // clean stop, the host drains), then retire the host with the installed CLI. It was the only
    // worker, so nobody answers the registry: the request waits for the next worker.
    const exited = new Promise((r) => worker!.once('exit', r));
    worker.kill('SIGKILL');
    await exited;
    const forget = await inRoot(mounts, [vmsnap(), 'fleet', 'forget', host, '--json'], env());
    expect(forget.code, forget.stderr).toBe(0);
    expect(JSON.parse(forget.stdout)).toMatchObject({ host, forgotten: expect.anything() });
  }, 300_000);
});
