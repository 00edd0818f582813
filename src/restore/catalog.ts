import { listImages, readImageIfExists } from '../ceph';
import type { IoCtx } from '../ceph';
import type { CatalogImage } from '../model/restore-point';

/**
 * Every image of a pool with its metadata and size: rbd_list2, then per image a read-only
 * rbd_open, rbd_metadata_list, rbd_stat and rbd_close, `concurrency` images at a time (each
 * image is a few round trips to the OSDs; in series, hundreds of images take seconds).
 * Images removed between the listing and the open are skipped.
 */
export async function readCatalog(io: IoCtx, concurrency = 16): Promise<CatalogImage[]> {
  const names = await listImages(io);
  const out: (CatalogImage | null)[] = new Array<CatalogImage | null>(names.length).fill(null);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < names.length) {
      const i = next++;
      out[i] = await readOne(io, names[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, names.length) }, worker));
  return out.filter((x): x is CatalogImage => x !== null);
}

function readOne(io: IoCtx, name: string): Promise<CatalogImage | null> {
  return readImageIfExists(io, name, async (img) => {
    const [meta, stat] = await Promise.all([img.listMetadata(), img.stat()]);
    return { pool: io.pool, name, sizeBytes: stat.size, meta };
  });
}
