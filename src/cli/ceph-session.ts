import { RadosCluster } from '../ceph';
import { isPermissionDenied } from '../ceph/errors';
import type { IoCtx } from '../ceph';
import type { Config } from '../config';
import { CliError, Exit } from './exit-codes';

/** A librados session for one CLI command: `fn` gets pools (or an rbd namespace of one), everything is closed after it. */
export async function withCeph<T>(config: Config, fn: (open: (pool: string, namespace?: string) => Promise<IoCtx>) => Promise<T>): Promise<T> {
  const { conf, id, keyring } = config.ceph;
  let cluster: RadosCluster;
  try {
    cluster = await RadosCluster.connect({ conf, id, keyring, connectTimeoutSec: 10 });
  } catch (err) {
    const refused = isPermissionDenied(err);
    throw new CliError(`${refused ? 'Ceph refused' : 'cannot connect to Ceph as'} client.${id}: ${(err as Error).message}`, refused ? Exit.authRefused : Exit.unreachable);
  }
  const opened: IoCtx[] = [];
  const open = async (pool: string, namespace = ''): Promise<IoCtx> => {
    try {
      const io = await cluster.openIoCtx(pool, namespace);
      opened.push(io);
      return io;
    } catch (err) {
      // No such pool is the caller's input; a key without caps on it is a refusal.
      throw new CliError(`cannot open pool ${pool}: ${(err as Error).message}`, isPermissionDenied(err) ? Exit.authRefused : Exit.badInput);
    }
  };
  try {
    return await fn(open).catch((err: unknown) => {
      if (isPermissionDenied(err)) throw new CliError(`Ceph refused client.${id}: ${(err as Error).message} (its caps do not cover this)`, Exit.authRefused);
      throw err;
    });
  } finally {
    for (const io of opened) await io.close().catch(() => undefined);
    await cluster.shutdown().catch(() => undefined);
  }
}
