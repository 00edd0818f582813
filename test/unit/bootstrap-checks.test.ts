import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- plain JS, run before node_modules exists
const { nodeModulesStale, addonStale, labDown } = require('../../scripts/bootstrap-checks.js') as {
  nodeModulesStale(root: string): string | undefined;
  addonStale(root: string): string | undefined;
  labDown(labDir: string): string | undefined;
};

/** What scripts/bootstrap.mjs (run first by `npm test` and `npm run demo`) decides to do. */
describe('bootstrap decisions', () => {
  const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'bootstrap-'));
  const write = (file: string, body: unknown) => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, typeof body === 'string' ? body : JSON.stringify(body));
  };
  const LOCK = {
    packages: {
      '': { name: 'vmsnap' },
      'node_modules/zod': { version: '4.6.7', integrity: 'sha512-a' },
      'node_modules/@esbuild/darwin-arm64': { version: '0.28.2', optional: true },
    },
  };

  it('npm ci when node_modules is missing, half-installed, or differs from the lock', () => {
    const root = tmp();
    write(path.join(root, 'package-lock.json'), LOCK);
    expect(nodeModulesStale(root)).toMatch(/node_modules missing/);
    // npm writes node_modules/.package-lock.json last: a directory without it is an unfinished install
    mkdirSync(path.join(root, 'node_modules/zod'), { recursive: true });
    expect(nodeModulesStale(root)).toMatch(/node_modules missing/);

    const installed = path.join(root, 'node_modules/.package-lock.json');
    write(installed, { packages: { 'node_modules/zod': { version: '4.6.7', integrity: 'sha512-a' } } });
    expect(nodeModulesStale(root)).toBeUndefined(); // another platform's optional binary may be absent

    write(installed, { packages: { 'node_modules/zod': { version: '4.6.6', integrity: 'sha512-a' } } });
    expect(nodeModulesStale(root)).toMatch(/zod is 4.6.6, the lock says 4.6.7/);
    write(installed, { packages: { 'node_modules/zod': { version: '4.6.7', integrity: 'sha512-b' } } });
    expect(nodeModulesStale(root)).toMatch(/integrity/);
    write(installed, { packages: {} });
    expect(nodeModulesStale(root)).toMatch(/zod not installed/);
    write(installed, { packages: { 'node_modules/zod': { version: '4.6.7' }, 'node_modules/left-pad': { version: '1.0.0' } } });
    expect(nodeModulesStale(root)).toMatch(/left-pad is installed but not in the lock/);
  });

  it('the addon is rebuilt when missing or older than native/', () => {
    const root = tmp();
    write(path.join(root, 'native/addon.cc'), '');
    expect(addonStale(root)).toMatch(/missing/);
    const addon = path.join(root, 'build/Release/vmsnap_rbd.node');
    write(addon, '');
    const past = new Date(Date.now() - 60_000);
    utimesSync(path.join(root, 'native/addon.cc'), past, past);
    expect(addonStale(root)).toBeUndefined();
    utimesSync(addon, new Date(past.getTime() - 60_000), new Date(past.getTime() - 60_000));
    expect(addonStale(root)).toMatch(/older than native/);
  });

  it('lab:up when a component is not up or one of its processes is gone', () => {
    const lab = tmp();
    expect(labDown(lab)).toMatch(/ceph is not up/);
    for (const c of ['ceph', 'temporal', 'libvirt']) write(path.join(lab, `env.d/${c}.env`), '');
    write(path.join(lab, 'env.d/guests.env'), "export VMSNAP_GUESTS='g1 g2'\nexport VMSNAP_GUESTS_B='g4'\n");
    const pidFiles = ['ceph/run/mon.a.pid', 'ceph/run/osd.0.pid', 'temporal/server.pid', 'libvirt/libvirtd.pid', 'libvirt-b/libvirtd.pid'];
    for (const g of ['g1', 'g2']) pidFiles.push(`libvirt/run/qemu/${g}.pid`, `guests/${g}/stamper.pid`);
    pidFiles.push('libvirt-b/run/qemu/g4.pid', 'guests/g4/stamper.pid');
    // a live process: this one
    for (const f of pidFiles) write(path.join(lab, f), `${process.pid}\n`);
    expect(labDown(lab)).toBeUndefined();
    // pid 2^22 + 1 is above Linux's pid_max limit: never a live process
    const dead = `${(1 << 22) + 1}\n`;
    write(path.join(lab, 'libvirt/run/qemu/g2.pid'), dead);
    expect(labDown(lab)).toMatch(/g2.pid name no running process/);
    // a guest that migrated to the other host counts as running there
    write(path.join(lab, 'libvirt-b/run/qemu/g2.pid'), `${process.pid}\n`);
    expect(labDown(lab)).toBeUndefined();
    write(path.join(lab, 'libvirt-b/libvirtd.pid'), dead);
    expect(labDown(lab)).toMatch(/libvirt-b\/libvirtd.pid names no running process/);
  });
});
