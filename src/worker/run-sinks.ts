import type { InjectedSinks } from '@temporalio/worker';
import type { Metrics } from '../host/metrics';
import type { RunSinks } from '../model/run-end';

/**
 * Where a snapshot run's end, told from the workflow sandbox by the run-end interceptor
 * (src/model/run-end-interceptor.ts), reaches this worker's metrics: once per run, never on
 * replay (a worker that replays a history to resume it does not count its end again).
 */
export function runSinks(metrics: Metrics): InjectedSinks<RunSinks> {
  return { vmsnapRuns: { ended: { fn: (_info, end) => metrics.runEnded(end), callDuringReplay: false } } };
}
