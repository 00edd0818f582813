import { CEPH, CONFIG, HELP, HOST_ID, LIBVIRT, STATE_DIR, TEMPORAL } from '../options';
import type { CommandSpec } from '../options';

export const WORKER = {
  name: 'worker',
  usage: ['[options]'],
  summary: 'run the host worker (workflows + activities for this hypervisor)',
  about: `Runs this hypervisor's worker on task queue vmsnap-<host>: the consistentSnapshot workflow and
its activities, plus vmsnap-<host>-bulk for clone/flatten/finalize. Thaws journaled guests left
frozen by a previous worker at start, sweeps expired freezes every VMSNAP_SWEEP_INTERVAL_MS.
SIGTERM/SIGINT: graceful shutdown (in-flight steps finish).`,
  options: {
    'metrics-port': { type: 'string', arg: 'N', help: 'Prometheus /metrics and /healthz on port N (VMSNAP_METRICS_PORT; 0 = off; default 9464)' },
    'metrics-address': { type: 'string', arg: 'A', help: '...and on address A (VMSNAP_METRICS_ADDRESS; 0.0.0.0 or :: for all; default 127.0.0.1)' },
    'bulk-concurrency': { type: 'string', arg: 'N', help: 'clone/flatten/finalize steps at a time on this host (VMSNAP_BULK_CONCURRENCY, default 2)' },
    ...HOST_ID,
    ...STATE_DIR,
    ...CONFIG,
    ...TEMPORAL,
    ...LIBVIRT,
    ...CEPH,
    ...HELP,
  },
} as const satisfies CommandSpec;
