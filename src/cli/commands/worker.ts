import { createHostWorker } from '../../worker/run-worker';
import type { HostWorker } from '../../worker/run-worker';
import { StateDirLockedError } from '../../host/state-dir-lock';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';

const HELP = `Usage: vmsnap worker [options]

Runs this hypervisor's worker on task queue vmsnap-<host>: the consistentSnapshot workflow and
its activities, plus vmsnap-<host>-bulk for clone/flatten/finalize. Thaws journaled guests left
frozen by a previous worker at start, sweeps expired freezes every VMSNAP_SWEEP_INTERVAL_MS.
SIGTERM/SIGINT: graceful shutdown (in-flight steps finish).

  --metrics-port N     Prometheus /metrics and /healthz on port N (VMSNAP_METRICS_PORT; 0 = off; default 9464)
  --metrics-address A  ...and on address A (VMSNAP_METRICS_ADDRESS; 0.0.0.0 or :: for all; default 127.0.0.1)
  --bulk-concurrency N clone/flatten/finalize steps at a time on this host (VMSNAP_BULK_CONCURRENCY, default 2)
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const { values } = parse(argv, { 'metrics-port': { type: 'string' }, 'metrics-address': { type: 'string' }, 'bulk-concurrency': { type: 'string' } }, false);
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
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
