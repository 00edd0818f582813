import { beforeAll, describe, expect, it } from 'vitest';
import { createImage, openImage, removeImage, type IoCtx } from '../../src/ceph';
import { uniqueName } from '../../support/ceph';
import { cephSuite } from '../helpers/ceph-suite';

const MiB = 1 << 20;

describe('ceph handle leak check', () => {
  const t = cephSuite();
  const { cleanups } = t;
  let io: IoCtx;
  beforeAll(() => {
    ({ io } = t);
  });

  it('create/open/close of 1,000 image handles does not grow RSS without bound', async () => {
    const name = uniqueName('img');
    await createImage(io, name, MiB);
    cleanups.defer(`image ${name}`, () => removeImage(io, name));
    const rss: Record<number, number> = {};
    const t0 = performance.now();
    for (let i = 1; i <= 1000; i++) {
      const img = await openImage(io, name);
      await img.stat();
      await img.close();
      if (i % 100 === 0) {
        (globalThis as { gc?: () => void }).gc?.();
        rss[i] = process.memoryUsage().rss / MiB;
      }
    }
    const ms = (performance.now() - t0) / 1000;
    // Plus 100 whole image lifecycles (create, open, close, remove).
    for (let i = 0; i < 100; i++) {
      const n = uniqueName('life');
      await createImage(io, n, MiB);
      const img = await openImage(io, n);
      await img.close();
      await removeImage(io, n);
    }
    const after = process.memoryUsage().rss / MiB;
    const line = Object.entries(rss).map(([k, v]) => `${k}:${v.toFixed(0)}`).join(' ');
    console.log(`[ceph-leak] RSS MiB after N open/close: ${line}; after 100 create/remove: ${after.toFixed(0)}; ` +
      `${(ms).toFixed(2)} ms per open+stat+close`);
    // Growth between the 200th and the 1000th handle: allocator warm-up aside, no per-handle growth.
    expect(rss[1000]! - rss[200]!).toBeLessThan(24);
  });
});
