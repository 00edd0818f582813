import { RadosCluster } from '../ceph';
import type { IoCtx } from '../ceph';
import type { Config } from '../config';
import { CliError, Exit } from './exit-codes';

/** A librados session for one CLI command: `fn` gets pools, everything is closed after it. */
export async function withCeph<T>(config: Config, fn: (open: (pool: string) => Promise<IoCtx>) => Promise<T>): Promise<T> {
  const { conf, id, keyring } = config.ceph;
  let cluster: RadosCluster;
  try {
    cluster = await RadosCluster.connect({ conf, id, keyring, connectTimeoutSec: 10 });
  } catch (err) {
    throw new CliError(`cannot connect to Ceph as client.${id}: ${(err as Error).message}`, Exit.unreachable);
  }
  const opened: IoCtx[] = [];
  const open = async (pool: string): Promise<IoCtx> => {
    try {
      const io = await cluster.openIoCtx(pool);
      opened.push(io);
      return io;
    } catch (err) {
      throw new CliError(`cannot open pool ${pool}: ${(err as Error).message}`, Exit.badInput);
    }
  };
  try {
    return await fn(open);
  } finally {
    for (const io of opened) await io.close().catch(() => undefined);
    await cluster.shutdown().catch(() => undefined);
  }
}
