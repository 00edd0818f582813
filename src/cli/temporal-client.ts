import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import type { ConnectionLike } from '@temporalio/client';
import type { Config } from '../config';
import { connectionOptions } from '../temporal-connection';
import { CliError, Exit } from './exit-codes';
import { InflightCalls } from './inflight-calls';
import { temporalExit } from './service-errors';
import { recordNamespace } from './temporal-client-namespace';

const tracked = new WeakMap<ConnectionLike, InflightCalls>();

/** How long closing waits for calls still in flight (a retrying call backs off up to 5 s). */
const DRAIN_LIMIT_MS = 15_000;

/**
 * A connection whose calls are counted, so {@link closeConnection} can drain them. A connection
 * that fails to connect is closed before the error is thrown: nothing of it outlives the command.
 */
export async function openConnection(config: Config): Promise<Connection> {
  const calls = new InflightCalls();
  const connection = Connection.lazy({
    ...connectionOptions(config),
    connectTimeout: '10s', // a loaded host took more than 5 s to answer a healthy server
    // The SDK's default retry stays; the counter goes first so it sees each call's final status.
    interceptors: [calls.interceptor, makeGrpcRetryInterceptor(defaultGrpcRetryOptions())],
  });
  tracked.set(connection, calls);
  try {
    await connection.ensureConnected();
  } catch (err) {
    await closeConnection(connection);
    throw err;
  }
  return connection;
}

/** Waits for the connection's calls in flight (bounded), then closes it. */
export async function closeConnection(connection: ConnectionLike): Promise<void> {
  const calls = tracked.get(connection);
  if (calls && !(await calls.idle(DRAIN_LIMIT_MS))) {
    process.stderr.write(`vmsnap: closing the Temporal connection with ${calls.inflight} call(s) still in flight after ${DRAIN_LIMIT_MS} ms\n`);
  }
  await connection.close();
}

export async function connectClient(config: Config): Promise<Client> {
  recordNamespace(config.temporal.namespace);
  try {
    return new Client({ connection: await openConnection(config), namespace: config.temporal.namespace });
  } catch (err) {
    // A server that answers and refuses the client's credentials is not unreachable.
    if (temporalExit(err) === Exit.authRefused) throw new CliError(`Temporal at ${config.temporal.address} refused vmsnap: ${(err as Error).message}`, Exit.authRefused);
    throw new CliError(
      `cannot reach Temporal at ${config.temporal.address}: ${(err as Error).message} (check --temporal-address / VMSNAP_TEMPORAL_ADDRESS / TEMPORAL_ADDRESS)`,
      Exit.unreachable,
    );
  }
}

/** Runs `fn` with a client, then drains and closes its connection, whatever `fn` did. */
export async function withClient<T>(config: Config, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = await connectClient(config);
  try {
    return await fn(client);
  } finally {
    await closeConnection(client.connection);
  }
}
