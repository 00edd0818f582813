import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config';
import { connectionOptions } from '../temporal-connection';
import { CliError, Exit } from './exit-codes';

export async function connectClient(config: Config): Promise<Client> {
  try {
    const connection = await Connection.connect({ ...connectionOptions(config), connectTimeout: '5s' });
    return new Client({ connection, namespace: config.temporal.namespace });
  } catch (err) {
    throw new CliError(
      `cannot reach Temporal at ${config.temporal.address}: ${(err as Error).message} (check --temporal-address / VMSNAP_TEMPORAL_ADDRESS)`,
      Exit.unreachable,
    );
  }
}
