/*
 * One librbd call on a live image, in a process of its own so the caller can SIGKILL it (see
 * bench/live-image-calls.ts). Prints `ADDR <librados address>` once connected, then
 * `MS <elapsed>` or `ERR <errno> <message>` for the one call.
 *
 *   npx tsx bench/live-call-child.ts <op> <pool> <image> <snap>
 */
import { RadosCluster, openImage } from '../src/ceph';
import type { Image } from '../src/ceph';
import { cephTestEnv } from '../support/ceph';

const [op, pool, name, snap] = process.argv.slice(2) as [string, string, string, string];

const calls: Record<string, (img: Image | undefined, open: (o?: { readOnly?: boolean; snap?: string }) => Promise<Image>) => Promise<unknown>> = {
  'open': (_i, open) => open(),
  'open read-only': (_i, open) => open({ readOnly: true }),
  'open read-only at snapshot': (_i, open) => open({ readOnly: true, snap }),
  'close': (img) => img!.close(),
  'metadata_get': (img) => img!.getMetadata('vmsnap.probe'),
  'metadata_list': (img) => img!.listMetadata(),
  'metadata_set': (img) => img!.setMetadata('vmsnap.probe', 'x'),
  'metadata_remove': (img) => img!.removeMetadata('vmsnap.probe'),
  'snap_list': (img) => img!.listSnaps(),
  'snap_exists': (img) => img!.snapExists(snap),
  'snap_create': (img) => img!.createSnap(snap),
  'snap_remove': (img) => img!.removeSnap(snap),
};

async function main(): Promise<void> {
  const call = calls[op];
  if (!call) throw new Error(`unknown op ${op}`);
  const cluster = await RadosCluster.connect(cephTestEnv());
  process.stdout.write(`ADDR ${await cluster.addrs()}\n`);
  const io = await cluster.openIoCtx(pool);
  const open = (o: { readOnly?: boolean; snap?: string } = {}) => openImage(io, name, o);
  const opensItself = op.startsWith('open');
  const img = opensItself ? undefined : await open();
  process.stdout.write('READY\n');
  // The parent stops the lock owner between READY and GO, so only the call itself meets it.
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
  const t0 = performance.now();
  try {
    const r = await call(img, open);
    const ms = performance.now() - t0;
    process.stdout.write(`MS ${ms.toFixed(1)}\n`);
    if (r && typeof r === 'object' && 'close' in r) await (r as Image).close();
    if (img && op !== 'close') await img.close();
  } catch (e) {
    const err = e as { errno?: number; message?: string };
    process.stdout.write(`ERR ${err.errno ?? '?'} ${err.message ?? String(e)}\n`);
  }
  await io.close();
  await cluster.shutdown();
}

main().then(() => process.exit(0), (e: unknown) => {
  process.stderr.write(`${String(e)}\n`);
  process.exit(1);
});
