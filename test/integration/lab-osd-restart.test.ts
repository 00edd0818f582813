// The lab's OSD comes back after a SIGKILL or a stop, as the fault suite uses it (lab/ceph.sh
// kill-osd|stop-osd|start-osd), and rbd I/O works after each restart: data written before the
// crash reads back intact and new writes land. ceph.sh runs with the lab's env file in its
// environment, as from a shell that sourced .lab/env: that once handed ceph-osd the admin keyring,
// and every restart then failed cephx. Needs `npm run lab:up` (Ceph alone is enough). Leaves the
// OSD up and healthy for the test files after it.
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { labVars, need } from '../../support/lab/env';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
const vars = labVars();
const labShellEnv = { ...process.env, ...vars };
const POOL = vars.VMSNAP_VM_POOL ?? 'vms';
const RUN = randomUUID().slice(0, 8);
const MiB = 1 << 20;

interface Written {
  image: string;
  sha256: string;
}

const written: Written[] = [];
const startSeconds: number[] = [];
let dir = '';

async function cephSh(cmd: string): Promise<string> {
  const { stderr } = await run('bash', [path.join(ROOT, 'lab/ceph.sh'), cmd], { env: labShellEnv, timeout: 150_000 });
  return stderr;
}

/** `ceph.sh status`'s line, "ceph ok ..." (exit 0) or "ceph down: why" (exit 1). */
async function cephStatus(): Promise<string> {
  try {
    const { stdout } = await run('bash', [path.join(ROOT, 'lab/ceph.sh'), 'status'], { env: labShellEnv, timeout: 60_000 });
    return stdout.trim();
  } catch (e) {
    return String((e as { stdout?: string }).stdout ?? e).trim();
  }
}

function rbdArgs(...rest: string[]): string[] {
  return ['-c', need(vars, 'CEPH_CONF'), '--id', vars.CEPH_ID ?? 'admin', '--keyring', need(vars, 'CEPH_KEYRING'), ...rest];
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A new 1 MiB image of random bytes (a real write through the OSD). */
async function writeImage(): Promise<void> {
  const data = randomBytes(MiB);
  const image = `lab-osd-restart-${RUN}-${written.length}`;
  const file = path.join(dir, image);
  writeFileSync(file, data);
  await run('rbd', rbdArgs('import', '--no-progress', file, `${POOL}/${image}`), { timeout: 60_000 });
  written.push({ image, sha256: sha256(data) });
}

/** Images read back in full: each must hold what was written to it. */
async function readBack(images: Written[]): Promise<void> {
  for (const w of images) {
    const { stdout } = await run('rbd', rbdArgs('export', '--no-progress', `${POOL}/${w.image}`, '-'), {
      encoding: 'buffer',
      maxBuffer: 4 * MiB,
      timeout: 60_000,
    });
    expect(sha256(stdout), `content of ${w.image}`).toBe(w.sha256);
  }
}

describe('lab OSD restart', () => {
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'vmsnap-osd-restart-'));
    await writeImage();
  });

  afterAll(async () => {
    // The files after this one need the OSD. start-osd keeps a running OSD and checks rbd I/O, so
    // this brings it back only if a failed step left it down.
    try {
      await cephSh('start-osd');
      for (const w of written) await run('rbd', rbdArgs('rm', '--no-progress', `${POOL}/${w.image}`), { timeout: 60_000 });
    } finally {
      if (dir) rmSync(dir, { recursive: true, force: true });
      process.stdout.write(`lab-osd-restart: start-osd took ${startSeconds.map((s) => s.toFixed(1)).join(', ')} s\n`);
    }
  });

  // Two crashes (SIGKILL: the mon is not told) and a clean stop (the fault suite's OSD cell).
  it.each(['kill-osd', 'kill-osd', 'stop-osd'])('%s, then start-osd: reads and writes work', async (op) => {
    await cephSh(op);
    expect(await cephStatus()).toMatch(/^ceph down: osd not running/);

    const t0 = performance.now();
    const log = await cephSh('start-osd');
    startSeconds.push((performance.now() - t0) / 1000);
    expect(log).toMatch(/osd\.0 started, rbd I\/O works/);

    await readBack(written); // all written before this crash
    await writeImage(); // and a write after the restart
    await readBack(written.slice(-1));
  });
});
