import { HELP, TEMPORAL_COMMAND } from '../options';
import type { CommandSpec } from '../options';

export const STATUS = {
  name: 'status',
  usage: ['<workflow-id> [options]'],
  summary: 'phase, progress and result of a run',
  about: "Shows a run's status, phase, flatten progress and, when finished, its result.",
  options: { ...TEMPORAL_COMMAND, ...HELP },
  notes: `Exit code: the run's, as with --wait: 0 running or completed, 1 failed, 3 cancelled, 5 timed out
or terminated; 2 no such run, 4 Temporal unreachable, 6 Temporal denied the call.`,
} as const satisfies CommandSpec;

export const CANCEL = {
  name: 'cancel',
  usage: ['<workflow-id> [options]'],
  summary: 'cancel a run (its compensations thaw and clean up)',
  about: `Requests cancellation. The run's compensations (thaw first, then removal of partial clones and
temporary snapshots) run to completion before it ends as cancelled.`,
  options: { ...TEMPORAL_COMMAND, ...HELP },
  notes: 'Exit code: 0 requested, 2 no such run, 4 Temporal unreachable, 6 Temporal denied the call.',
} as const satisfies CommandSpec;
