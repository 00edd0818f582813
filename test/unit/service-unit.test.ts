import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/config';
import { WORKER_NODE_OPTIONS } from '../../src/worker/node-options';

const ROOT = path.resolve(__dirname, '../..');
const UNIT = path.join(ROOT, 'deploy/vmsnap-worker.service');

/** The values of `key=` in the unit, every occurrence, space-separated lists split. */
function values(unit: string, key: string): string[] {
  return [...unit.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].flatMap((m) => m[1]!.trim().split(/\s+/));
}

describe('deploy/vmsnap-worker.service', () => {
  const unit = readFileSync(UNIT, 'utf8');

  it('passes systemd-analyze verify (lab/deps.sh installs systemd for it)', () => {
    // No skip when the tool is missing: a unit nobody verified is what this test exists to prevent.
    const r = spawnSync('systemd-analyze', ['verify', UNIT], { encoding: 'utf8' });
    if (r.error) throw new Error(`systemd-analyze: ${r.error.message} (bash lab/deps.sh installs systemd)`);
    // verify exits 0 on an unknown key or a bad value ("ignoring"): its warnings are the verdict.
    expect(r.stderr + r.stdout).toBe('');
    expect(r.status).toBe(0);
  });

  it('stops and restarts only the worker process, so the freeze guard watchdogs survive', () => {
    expect(unit).toMatch(/^KillMode=process$/m);
  });

  it('reads its settings from /etc/vmsnap/vmsnap.env', () => {
    expect(values(unit, 'EnvironmentFile')).toEqual(['-/etc/vmsnap/vmsnap.env']);
  });

  it('starts the worker with the V8 flags it ships with', () => {
    expect(values(unit, 'Environment')).toEqual([`NODE_OPTIONS=${WORKER_NODE_OPTIONS}`]);
  });

  it('starts after libvirt, monolithic (libvirtd) or modular (virtqemud)', () => {
    expect(values(unit, 'After')).toEqual(expect.arrayContaining(['libvirtd.service', 'virtqemud.service', 'virtqemud.socket']));
    // Wants=/Requires= on them would start, or fail for, the daemon the host does not use.
    expect(unit).not.toMatch(/^(Wants|Requires|BindsTo)=.*(libvirtd|virtqemud)/m);
  });

  it('is hardened, and leaves what the worker needs writable or readable', () => {
    expect(values(unit, 'ProtectSystem')).toEqual(['strict']);
    for (const k of ['NoNewPrivileges', 'PrivateTmp', 'ProtectHome', 'PrivateDevices', 'ProtectKernelModules']) expect(values(unit, k)).toEqual(['yes']);
    // libvirt's sockets (read-write and -ro, libvirtd's or virtqemud's) live in /run/libvirt.
    expect(values(unit, 'ReadWritePaths')).toContain('/run/libvirt');
    // The state dir systemd creates is the worker's default state dir.
    expect(`/var/lib/${values(unit, 'StateDirectory')[0]}`).toBe(ConfigSchema.shape.stateDir.parse(undefined));
    // Ceph's config and keyring in /etc/ceph stay readable: nothing hides /etc.
    expect(unit).not.toMatch(/^(InaccessiblePaths|TemporaryFileSystem)=/m);
    // V8 needs writable+executable memory; unix sockets (libvirt) and TCP (Ceph, Temporal) stay allowed.
    expect(unit).not.toMatch(/^MemoryDenyWriteExecute=yes/m);
    expect(values(unit, 'RestrictAddressFamilies')).toEqual(['AF_UNIX', 'AF_INET', 'AF_INET6']);
  });

  it('is the unit docs/install.md shows', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/install.md'), 'utf8');
    const shown = /```ini\n(\[Unit\][\s\S]*?)```/.exec(doc)?.[1];
    expect(shown).toBeTruthy();
    expect(shown!.trim()).toBe(unit.trim());
  });
});
