import type { OmapCliOptions } from '../ceph/omap-cli';

/** What a freeze guard's watchdog process is told (one JSON argv element). */
export interface WatchdogArgs {
  uri: string;
  stateDir: string;
  domainUuid: string;
  domainName: string;
  /** The watchdog acts only while the journal entry still names this id. */
  guardId: string;
  mode: 'window' | 'watch';
  /** CLOCK_MONOTONIC ms: when a window's guard fires, or when a watch ends. */
  deadlineMono: number;
  agentTimeoutSec: number;
  /** The freeze the entry guards (a watch: the one whose call had an unknown outcome). */
  freezeId?: string;
  /** A watch: where the cluster-wide obligations are read, so another run's window is left alone (src/safety/late-freeze.ts). */
  obligations?: { cli: OmapCliOptions; pool: string };
  clockSkewMs?: number;
  /** A pipe to write one line to once started (then closed): the guard waits for it before the freeze. */
  readyFd?: number;
}
