import type { CatalogImage } from '../src/model/restore-point';
import { readCatalog } from '../src/restore/catalog';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

/** Every image of an image pool with its vmsnap metadata: what restore, verify and its rhythm read. */
export async function poolCatalog(deps: ActivityDeps, pool: string): Promise<CatalogImage[]> {
  const io = await during(`open pool ${pool}`, () => deps.ioctx(pool));
  return during(`list images in ${pool}`, () => readCatalog(io));
}
