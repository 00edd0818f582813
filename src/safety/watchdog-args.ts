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
  /** A pipe to write one line to once started (then closed): the guard waits for it before the freeze. */
  readyFd?: number;
}
