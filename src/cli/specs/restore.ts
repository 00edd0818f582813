import { CEPH, HELP, LIBVIRT_RW, PIN_HOST, TEMPORAL_COMMAND } from '../options';
import type { CommandSpec } from '../options';

export const RESTORE = {
  name: 'restore',
  usage: ['<domain> [--from RUN|latest] [--as NEW-NAME | --stop] [options]', '<domain> --confirm RESTORE-WORKFLOW-ID'],
  summary: 'restore a VM from an image set, in place or --as a new VM (--confirm to drop kept disks)',
  about: `Starts the restoreVm workflow on the fleet queue: the image set is chosen once, its VM is found
by UUID on every live host, and the restore runs on that VM's host, holding the VM's domain lock
(in place) as snapshot runs do. --host pins it to that host's queue instead. <domain> is the VM the
image set was taken of (as "vmsnap list <domain>" shows it).

Without --as the restore is in place: the VM must be shut off (on every host); each disk is
replaced by a clone of its image (<disk>-r<id>), the previous disks are kept until --confirm, and
the VM is started.`,
  options: {
    from: { type: 'string', arg: 'RUN|latest', help: "the snapshot run's workflow id, or the newest restorable set (default)" },
    as: {
      type: 'string',
      arg: 'NEW-NAME',
      help: 'a new VM: the recorded definition with a new name, UUID and MAC addresses, disks <NEW-NAME>-<target> cloned from the images, started, ready when its guest agent answers. The original VM is not touched.',
    },
    stop: { type: 'boolean', help: 'in place: shut a running VM down first (guest agent, then ACPI)' },
    'shutdown-timeout': {
      type: 'string',
      arg: 'DURATION',
      help: 'for --stop (default 2m); on timeout the VM is left running',
      duration: { legacy: { flag: 'shutdown-timeout-ms', unit: 'ms' } },
    },
    'ready-timeout': {
      type: 'string',
      arg: 'DURATION',
      help: "how long to wait for the restored VM's agent (default 3m)",
      duration: { legacy: { flag: 'ready-timeout-ms', unit: 'ms' } },
    },
    flatten: { type: 'boolean', help: 'flatten the restored disks (independent of the images)' },
    verify: { type: 'boolean', help: "compare each restored disk's sha256 with its image before starting" },
    'vm-pool': { type: 'string', arg: 'POOL', help: "pool for the restored disks (default: the VM's disks' pool)" },
    pool: { type: 'string', arg: 'POOL', help: 'image pool (default: the configured image pool, "images")' },
    'workflow-id': { type: 'string', arg: 'ID', help: 'default restore-<domain>-<UTC timestamp>; re-running an id finishes it' },
    wait: { type: 'boolean', help: 'follow the run and print its result' },
    confirm: {
      type: 'string',
      arg: 'ID',
      help: "remove the disks that in-place restore ID replaced, once ID has COMPLETED; run it on the VM's host (no workflow)",
    },
    ...PIN_HOST,
    ...TEMPORAL_COMMAND,
    ...LIBVIRT_RW,
    ...CEPH,
    ...HELP,
  },
  notes: 'Exit codes with --wait: as vmsnap snapshot --wait.',
} as const satisfies CommandSpec;

export const VERIFY = {
  name: 'verify',
  usage: ["<domain> [--from RUN|latest] [--check 'COMMAND ARGS'] [options]"],
  summary: 'prove an image set boots (and passes --check) as a throw-away VM; records the verdict',
  about: `Proves an image set restores to a VM that works: starts the verifySnapshot workflow on the fleet
queue, which restores the set as a throw-away VM beside the source VM, or on the host with the
most room when the VM's memory does not fit there beyond its reserve (its own name
<domain>-verify-<id> and UUID, its own disks and console files, no network interfaces), waits for
its guest agent, optionally runs a check command in it through the agent, then removes the copy
and its disks whatever happened, and records the verdict on the image set ("vmsnap list" shows
it). The source VM and its disks are never touched.`,
  options: {
    from: { type: 'string', arg: 'RUN|latest', help: "the snapshot run's workflow id, or the newest restorable set (default)" },
    check: {
      type: 'string',
      arg: "'COMMAND ARGS'",
      help: "run in the copy through guest-exec (split on spaces, no shell; the agent searches PATH), again every 2 s until it exits 0 (services start after the agent answers), e.g. --check 'pg_isready -q'",
    },
    'check-timeout': {
      type: 'string',
      arg: 'DURATION',
      help: 'how long the check may keep failing (default 1m); then: failed',
      duration: { legacy: { flag: 'check-timeout-ms', unit: 'ms' } },
    },
    'ready-timeout': {
      type: 'string',
      arg: 'DURATION',
      help: 'how long the copy may take until its agent answers (default 5m)',
      duration: { legacy: { flag: 'ready-timeout-ms', unit: 'ms' } },
    },
    pool: { type: 'string', arg: 'POOL', help: 'image pool (default: the configured image pool, "images")' },
    'workflow-id': { type: 'string', arg: 'ID', help: 'default verify-<domain>-<UTC timestamp>' },
    wait: { type: 'boolean', help: 'follow the run and print the verdict' },
    ...TEMPORAL_COMMAND,
    ...HELP,
  },
  notes: `Exit codes with --wait: 0 verified, 1 failed verdict (or a failed run), 2 bad input (nothing
started), 4 Temporal, Ceph or libvirt unreachable, 5 the run timed out or was terminated.`,
} as const satisfies CommandSpec;
