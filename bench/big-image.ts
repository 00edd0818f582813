/**
 * The 1 GiB image with data that stands in for a realistic root disk (the lab guests' disks are
 * 64 MiB): created once per bench run in the VM pool, filled through the binding, given one base
 * snapshot (for the flatten-throughput comparison), and removed at the end.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createImage, openImage, removeImage } from '../src/ceph';
import type { Image, IoCtx } from '../src/ceph';
import { removeSnapIfAny } from './lab-context';

export const BIG_IMAGE_BYTES = 1 << 30;
export const BASE_SNAP = 'bench-base';
const CHUNK = 4 << 20;

export interface BigImage {
  io: IoCtx;
  name: string;
  image: Image;
  remove(): Promise<void>;
}

export async function createBigImage(io: IoCtx, bytes = BIG_IMAGE_BYTES): Promise<BigImage> {
  const name = `bench-1g-${randomUUID().slice(0, 8)}`;
  await createImage(io, name, bytes);
  const image = await openImage(io, name);
  const big: BigImage = {
    io,
    name,
    image,
    async remove() {
      for (const s of await image.listSnaps().catch(() => [])) await removeSnapIfAny(image, s.name).catch(() => undefined);
      await image.close().catch(() => undefined);
      await removeImage(io, name);
    },
  };
  try {
    // Every 4 MiB object gets data (random bytes, stamped with the offset): a full copy to flatten.
    const pattern = randomBytes(CHUNK);
    const offsets: number[] = [];
    for (let off = 0; off < bytes; off += CHUNK) offsets.push(off);
    const writeOne = async (off: number): Promise<void> => {
      const buf = Buffer.from(pattern);
      buf.writeDoubleLE(off, 0);
      await image.write(off, buf);
    };
    for (let i = 0; i < offsets.length; i += 4) await Promise.all(offsets.slice(i, i + 4).map(writeOne));
    await image.createSnap(BASE_SNAP);
  } catch (err) {
    await big.remove().catch(() => undefined);
    throw err;
  }
  return big;
}
