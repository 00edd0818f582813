import type { OptionTable } from '../options';

/** Flags that become a run's input: `vmsnap snapshot` and `vmsnap schedule create` take them. */
export const SNAPSHOT_INPUT = {
  disk: { type: 'string', multiple: true, arg: 'TARGET', help: 'snapshot only this disk; default: all RBD disks' },
  'skip-non-rbd': { type: 'boolean', help: 'with the default disk set, skip non-RBD disks instead of failing' },
  quiesce: {
    type: 'string',
    choices: ['require', 'prefer', 'skip'],
    help: 'default prefer: freeze if the agent answers, else say quiesced:false; require fails the run instead',
  },
  pool: { type: 'string', arg: 'POOL', help: 'image pool for the flattened copies (default: the configured image pool, "images")' },
  image: { type: 'string', multiple: true, arg: 'TARGET=NAME', help: 'image name for a disk' },
  'no-clone': { type: 'boolean', help: 'keep only the RBD snapshot on the source image' },
  'freeze-deadline': {
    type: 'string',
    arg: 'DURATION',
    help: 'max time the guest may stay frozen (default 10s)',
    duration: { legacy: { flag: 'freeze-deadline-ms', unit: 'ms' } },
  },
  'agent-timeout': {
    type: 'string',
    arg: 'DURATION',
    help: 'guest agent timeout, whole seconds (default 5s)',
    duration: { step: 1000, legacy: { flag: 'agent-timeout-s', unit: 's' } },
  },
  'snapshot-timeout': {
    type: 'string',
    arg: 'DURATION',
    help: 'bound on the snapshot step, below the freeze deadline (default 8s)',
    duration: { legacy: { flag: 'snapshot-timeout-ms', unit: 'ms' } },
  },
  label: { type: 'string', multiple: true, arg: 'KEY=VALUE', help: 'recorded on created images' },
  mirror: {
    type: 'boolean',
    help: "DR mode: after the thaw, carry the run's snapshots to the DR site (rbd-mirror, snapshot mode) and wait until they are there",
  },
  'mirror-wait': { type: 'string', arg: 'DURATION', help: 'with --mirror: how long to wait for the DR site (default 10m)', duration: {} },
} as const satisfies OptionTable;
