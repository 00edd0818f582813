import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RadosCluster, RbdError, Snapshotter, addonThreadStats, isNotFound, isTimedOut, rbdVersion, releaseFreedMemory } from '../../src/ceph';
import { native } from '../../src/ceph/native';

// Needs the built addon (npm ci builds it), not a cluster.
describe('native addon', () => {
  it('loads and reports librbd 1.16 (Ceph 16)', () => {
    expect(rbdVersion()).toMatch(/^1\.16\.\d+$/);
    expect(addonThreadStats()).toMatchObject({ queued: 0 });
  });

  it('hands freed heap back to the kernel on request (malloc_trim)', () => {
    // A freed 64 MiB calloc is mmapped and already gone; many small frees are what trim returns.
    const junk = Array.from({ length: 20_000 }, (_, i) => Buffer.alloc(1024 + (i % 7)));
    junk.length = 0;
    expect(typeof releaseFreedMemory()).toBe('boolean');
  });

  it('rejects wrong argument types synchronously with a TypeError', () => {
    expect(() => native().openImage({} as never, 'x', null, false)).toThrow(TypeError);
    expect(() => native().connect(1 as never, 'admin', null, null)).toThrow(TypeError);
  });

  it('connect to a missing conf file fails with errno and call name', async () => {
    const err = await native().connect('/nonexistent/ceph.conf', 'admin', null, 1).catch((e: unknown) => e);
    expect(err).toMatchObject({ errno: 2, code: 'ENOENT', call: 'rados_conf_read_file', message: 'rados_conf_read_file: ENOENT (2)' });
  });

  it('connect gives up after connectTimeoutSec with ETIMEDOUT when no monitor answers', async () => {
    const conf = path.join(mkdtempSync(path.join(tmpdir(), 'vmsnap-conf-')), 'ceph.conf');
    writeFileSync(conf, '[global]\nmon_host = v2:127.0.0.1:9\nauth_client_required = none\n');
    const t0 = performance.now();
    const err = await RadosCluster.connect({ conf, connectTimeoutSec: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RbdError);
    expect(isTimedOut(err)).toBe(true);
    expect(err).toMatchObject({ call: 'rados_connect' });
    expect(performance.now() - t0).toBeLessThan(5000);
  });

  it('Snapshotter surfaces a child that cannot connect as its RbdError', async () => {
    const s = new Snapshotter({ conf: '/nonexistent/ceph.conf' });
    const err = await s.createSnaps([{ pool: 'p', image: 'i', snap: 's' }], { timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(isNotFound(err)).toBe(true);
    expect(err).toMatchObject({ call: 'rados_conf_read_file' });
    await s.close();
  });
});
