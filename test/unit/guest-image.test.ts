import { execFile } from 'node:child_process';
import { mkdtempSync, openSync, readSync, closeSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const SCRIPT = path.resolve(__dirname, '../../lab/guest-image.sh');

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [SCRIPT, ...args], { env, timeout: 280_000, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

function head(file: string, n: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const b = Buffer.alloc(n);
    readSync(fd, b, 0, n, 0);
    return b;
  } finally {
    closeSync(fd);
  }
}

/*
 * The first guest-image build on a machine (an empty image cache) used to build the image and then
 * exit 1 in its cache-pruning pipeline before printing the directory, so the first `lab:up` failed
 * and every later one worked. The .debs come from the shared download cache
 * (VMSNAP_GUEST_DEBS, default ~/.cache/vmsnap/guest-debs): the mirror is needed only the first time.
 */
describe('lab/guest-image.sh build into an empty cache', () => {
  const cache = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-guest-cache-'));
  afterAll(() => rmSync(cache, { recursive: true, force: true }));

  it('exits 0, prints the image directory, and that directory holds a bootable kernel and initramfs', async () => {
    const env = { ...process.env, VMSNAP_GUEST_IMAGE_CACHE: cache };
    const dir = await run(['dir'], env);
    expect(dir.code).toBe(0);
    const expected = dir.stdout.trim();
    expect(path.dirname(expected)).toBe(cache);

    const built = await run(['build'], env);
    expect(built.code, built.stderr).toBe(0);
    expect(built.stdout).toBe(`${expected}\n`);
    expect(built.stderr).not.toContain('FAILED');
    expect(readdirSync(cache)).toEqual([path.basename(expected)]);
    expect(head(path.join(expected, 'vmlinux'), 4).toString('latin1')).toBe('\x7fELF');
    // newc cpio magic
    expect(head(path.join(expected, 'initramfs.cpio'), 6).toString('latin1')).toBe('070701');
    expect(statSync(path.join(expected, 'initramfs.cpio')).size).toBeGreaterThan(1 << 20);

    // A second build is a cache hit: same directory, nothing rebuilt.
    const mtime = statSync(path.join(expected, 'vmlinux')).mtimeMs;
    const again = await run(['build'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(`${expected}\n`);
    expect(statSync(path.join(expected, 'vmlinux')).mtimeMs).toBe(mtime);
  }, 300_000);
});
