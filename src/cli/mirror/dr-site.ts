import { RadosCluster } from '../../ceph';
import type { IoCtx } from '../../ceph';
import type { Config } from '../../config';
import { messageOf, within } from '../doctor/check';

/** The DR site's cluster (config drCeph), read only: what `mirror status` and `doctor` look at there. */
export interface DrSite {
  fsid: string;
  /** The pool (or namespace) of the same name there; cached, closed with the session. */
  open(pool: string, namespace: string): Promise<IoCtx>;
}

/**
 * Runs `fn` with a session on the DR site; `undefined` when none is configured, `{ error }` when it
 * cannot be reached within 20 s (the caller reports that, it is not the command's failure).
 */
export async function withDrSite<T>(config: Config, fn: (dr: DrSite) => Promise<T>): Promise<T | { error: string } | undefined> {
  const c = config.drCeph;
  if (!c) return undefined;
  let cluster: RadosCluster;
  try {
    cluster = await within(20_000, `rados connect to the DR site (${c.conf})`, RadosCluster.connect({ conf: c.conf, id: c.id, keyring: c.keyring, connectTimeoutSec: 10 }));
  } catch (err) {
    return { error: `cannot reach the DR site as client.${c.id} with ${c.conf}: ${messageOf(err)}` };
  }
  const pools = new Map<string, Promise<IoCtx>>();
  try {
    const fsid = await cluster.fsid();
    return await fn({
      fsid,
      open: (pool, namespace) => {
        const key = `${pool}/${namespace}`;
        let io = pools.get(key);
        if (!io) pools.set(key, (io = within(10_000, `open pool ${key} on the DR site`, cluster.openIoCtx(pool, namespace))));
        return io;
      },
    });
  } finally {
    for (const io of pools.values()) await io.then((i) => i.close()).catch(() => undefined);
    await cluster.shutdown().catch(() => undefined);
  }
}
