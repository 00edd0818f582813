import { RadosCluster, isNotFound, isPermissionDenied, listImages } from '../../ceph';
import type { Config } from '../../config';
import { fail, messageOf, ok, within } from './check';
import type { CheckResult } from './check';

/**
 * Ceph reachable with vmsnap's own id and keyring, and every pool vmsnap will touch (the image
 * pool, the domains' source pools) opens and lists with that key.
 */
export async function checkCeph(config: Config, pools: string[]): Promise<CheckResult[]> {
  const { conf, id, keyring } = config.ceph;
  let cluster: RadosCluster;
  try {
    cluster = await within(20_000, 'rados connect', RadosCluster.connect({ conf, id, keyring, connectTimeoutSec: 10 }));
  } catch (err) {
    return [
      fail('ceph', `cannot connect as client.${id} with ${conf}${keyring ? ` and ${keyring}` : ''}: ${messageOf(err)}`,
        'check the monitors are up and --ceph-conf / --ceph-id / --ceph-keyring (VMSNAP_CEPH_*)', true),
    ];
  }
  try {
    const out = [ok('ceph', `connected as client.${id} (fsid ${await cluster.fsid()})`)];
    for (const pool of pools) out.push(await checkPool(cluster, pool, id));
    return out;
  } finally {
    await cluster.shutdown().catch(() => undefined);
  }
}

async function checkPool(cluster: RadosCluster, pool: string, id: string): Promise<CheckResult> {
  const name = `ceph pool ${pool}`;
  let io;
  try {
    io = await within(10_000, 'open pool', cluster.openIoCtx(pool));
    const images = await within(10_000, 'list images', listImages(io));
    return ok(name, `opens and lists with client.${id} (${images.length} images)`);
  } catch (err) {
    if (isNotFound(err)) return fail(name, 'does not exist', `ceph osd pool create ${pool} && rbd pool init ${pool}`);
    if (isPermissionDenied(err)) {
      return fail(name, `permission denied for client.${id}`, `ceph auth caps client.${id} mon 'profile rbd' osd 'profile rbd pool=${pool}, ...' (list every pool vmsnap uses)`);
    }
    return fail(name, messageOf(err), 'check the pool and the key');
  } finally {
    await io?.close().catch(() => undefined);
  }
}
