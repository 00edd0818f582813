import { createHostWorker } from '../../worker/run-worker';
import type { HostWorker } from '../../worker/run-worker';
import { StateDirLockedError } from '../../host/state-dir-lock';
import { configFrom } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { WORKER } from '../specs/worker';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(WORKER, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  if (parsed.positionals.length) throw new CliError('worker takes no arguments (see --help)', Exit.badInput);
  if (values['metrics-port'] !== undefined) process.env.VMSNAP_METRICS_PORT = values['metrics-port'];
  if (values['metrics-address'] !== undefined) process.env.VMSNAP_METRICS_ADDRESS = values['metrics-address'];
  if (values['bulk-concurrency'] !== undefined) process.env.VMSNAP_BULK_CONCURRENCY = values['bulk-concurrency'];
  const config = configFrom(values);
  // A signal during start (Ceph or Temporal still unreachable, retried) aborts the start; after
  // it, a graceful shutdown.
  const starting = new AbortController();
  let w: HostWorker | undefined;
  const stop = () => (w ? w.shutdown() : starting.abort());
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  try {
    w = await createHostWorker(config, undefined, { signal: starting.signal });
  } catch (err) {
    if (err instanceof StateDirLockedError) throw new CliError(err.message, Exit.failed);
    if (starting.signal.aborted) return Exit.ok;
    throw err;
  }
  await w.run();
  return Exit.ok;
}
