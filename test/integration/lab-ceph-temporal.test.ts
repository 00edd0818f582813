// The lab's Ceph cluster and Temporal server answer, as the rest of the suite expects them to.
// Needs `npm run lab:up`.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { LabNotUpError, loadLabEnv, parseEnvFile } from '../../support/lab/env';
import type { LabEnv } from '../../support/lab/env';

const run = promisify(execFile);
const REPO = path.resolve(__dirname, '../..');

const { INDEXED_VALUE_TYPE_KEYWORD: KEYWORD, INDEXED_VALUE_TYPE_BOOL: BOOL } =
  temporal.api.enums.v1.IndexedValueType;

const lab: LabEnv = loadLabEnv();

/** `rbd -c CONF --id ID ARGS...` with a time limit; rejects on a non-zero exit. */
function rbd(id: string, ...args: string[]) {
  // Without CEPH_KEYRING: a shell that sourced the lab env has it pointing at the admin keyring,
  // and `--id vmsnap` would then fail to authenticate instead of showing vmsnap's caps.
  const { CEPH_KEYRING: _admin, ...env } = process.env;
  return run('rbd', ['-c', lab.ceph.conf, '--id', id, ...args], { timeout: 30_000, env });
}

describe('lab env file', () => {
  it('parses export lines and says how to bring the lab up when missing', () => {
    expect(parseEnvFile("# c\nexport A='x y'\nB=plain\n\nexport C=\"q\"\n")).toEqual({
      A: 'x y',
      B: 'plain',
      C: 'q',
    });
    const empty = mkdtempSync(path.join(tmpdir(), 'vmsnap-noenv-'));
    try {
      expect(() => loadLabEnv(empty)).toThrow(LabNotUpError);
      expect(() => loadLabEnv(empty)).toThrow(/lab is not up: run npm run lab:up/);
      writeFileSync(path.join(empty, 'env'), "export TEMPORAL_ADDRESS='127.0.0.1:7233'\n");
      expect(() => loadLabEnv(empty)).toThrow(/has no TEMPORAL_NAMESPACE/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('names the Ceph and Temporal endpoints', () => {
    expect(lab.temporal.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(lab.temporal.uiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(lab.ceph.monHost).toBe('127.0.0.1');
    expect(lab.ceph.monPort).toBeGreaterThan(0);
    expect(lab.ceph.adminId).toBe('admin');
    expect(lab.ceph.vmsnapId).toBe('vmsnap');
    expect(lab.pools).toEqual({ vm: 'vms', image: 'images', other: 'other' });
  });
});

describe('lab Temporal', () => {
  let connection: Connection;
  beforeAll(async () => {
    connection = await Connection.connect({ address: lab.temporal.address });
  });
  afterAll(async () => {
    await connection?.close();
  });

  it('answers GetSystemInfo', async () => {
    const info = await connection.workflowService.getSystemInfo({});
    expect(info.serverVersion).toMatch(/^\d+\.\d+/);
  });

  it('has the vmsnap search attributes registered', async () => {
    const { customAttributes } = await connection.operatorService.listSearchAttributes({
      namespace: lab.temporal.namespace,
    });
    expect(customAttributes).toMatchObject({
      VmsnapDomain: KEYWORD,
      VmsnapHost: KEYWORD,
      VmsnapPhase: KEYWORD,
      VmsnapQuiesced: BOOL,
      VmsnapResult: KEYWORD,
    });
  });
});

describe('lab Ceph', () => {
  it.each(['vms', 'images'])('rbd ls %s works', async (pool) => {
    await expect(rbd(lab.ceph.adminId, 'ls', pool)).resolves.toBeDefined();
  });

  it('lets client.vmsnap create and remove an image in the VM pool', async () => {
    const image = `${lab.pools.vm}/lab-test-${randomUUID()}`;
    await rbd(lab.ceph.vmsnapId, 'create', '--size', '4M', image);
    try {
      const { stdout } = await rbd(lab.ceph.vmsnapId, 'ls', lab.pools.vm);
      expect(stdout.split('\n')).toContain(image.split('/')[1]);
    } finally {
      await rbd(lab.ceph.vmsnapId, 'rm', '--no-progress', image);
    }
  });

  it('refuses client.vmsnap in a pool outside its caps', async () => {
    const image = `${lab.pools.other}/lab-test-${randomUUID()}`;
    await expect(rbd(lab.ceph.vmsnapId, 'create', '--size', '4M', image)).rejects.toMatchObject({
      stderr: expect.stringMatching(/Operation not permitted/),
    });
    const { stdout } = await rbd(lab.ceph.adminId, 'ls', lab.pools.other);
    expect(stdout).not.toContain(image.split('/')[1]);
  });
});

describe('lab status', () => {
  it('npm run lab:status exits 0', async () => {
    const { stdout } = await run('npm', ['run', '--silent', 'lab:status'], {
      cwd: REPO,
      timeout: 120_000,
    });
    expect(stdout).toMatch(/^ceph ok/m);
    expect(stdout).toMatch(/^temporal ok/m);
  });
});
