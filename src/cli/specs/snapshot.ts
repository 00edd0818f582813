import { HELP, PIN_HOST, TEMPORAL_COMMAND } from '../options';
import type { CommandSpec } from '../options';
import { SNAPSHOT_INPUT } from './snapshot-input';

export const SNAPSHOT = {
  name: 'snapshot',
  usage: ['<domain> [options]'],
  summary: 'snapshot a domain (starts the workflow; --wait to follow it)',
  about: `Starts the consistentSnapshot workflow for a VM by name, wherever it runs: on the fleet queue
vmsnap, where the run finds the VM's host and does the work there. With --host ID the run goes
straight to that host's queue vmsnap-<ID> (and fails DomainNotFound if the VM is not there).`,
  options: {
    ...SNAPSHOT_INPUT,
    'workflow-id': { type: 'string', arg: 'ID', help: 'default snap-<domain>-<UTC timestamp>; re-using an id is idempotent' },
    wait: { type: 'boolean', help: 'follow the run (phases, flatten progress) and print its result' },
    ...PIN_HOST,
    ...TEMPORAL_COMMAND,
    ...HELP,
  },
  notes: `Exit codes with --wait: 0 done, 1 the run failed, 2 bad input (nothing started), 3 cancelled,
4 Temporal unreachable, 5 the run timed out or was terminated.

The same input works with the Temporal CLI:
  temporal workflow start --type consistentSnapshot --task-queue vmsnap \\
    --workflow-id snap-vm-42-1 --input '{"domain":"vm-42","quiesce":"require"}'`,
} as const satisfies CommandSpec;
