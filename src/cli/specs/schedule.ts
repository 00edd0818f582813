import { HELP, PIN_HOST, TEMPORAL_COMMAND } from '../options';
import type { CommandSpec, OptionTable } from '../options';
import { KEEP } from './retention';
import { SNAPSHOT_INPUT } from './snapshot-input';

const COMMON = { ...TEMPORAL_COMMAND, ...HELP } as const;

const SPEC = {
  every: { type: 'string', arg: 'DURATION', help: 'interval: 90s, 30m, 1h, 1h30m, 1d (at least 10s)', duration: { min: 10_000 } },
  cron: { type: 'string', arg: 'EXPR', help: "five-field cron, e.g. '0 3 * * *' (or @daily, @hourly...)" },
  window: {
    type: 'string',
    arg: 'HH:MM-HH:MM',
    help: 'daily, at a moment Temporal picks anew each day inside the window (e.g. 01:00-05:00; may cross midnight): a fleet\'s schedules with one window spread their starts over it',
  },
  timezone: { type: 'string', arg: 'TZ', help: 'IANA zone for --cron and --window (default UTC)' },
} as const satisfies OptionTable;

const OVERLAP = {
  overlap: {
    type: 'string',
    choices: ['skip', 'buffer-one', 'allow-all'],
    help: 'when a run is still going at the next time (default skip; allow-all still runs one snapshot per VM at a time: the others fail DomainBusy)',
  },
} as const satisfies OptionTable;

const CATCHUP = {
  'catchup-window': { type: 'string', arg: 'DURATION', help: 'after an outage, start a missed run if it is at most this late (default 1h)', duration: { min: 10_000 } },
} as const satisfies OptionTable;

const NOTE = { note: { type: 'string', arg: 'TEXT', help: "note shown with the schedule's state" } } as const satisfies OptionTable;

export const SCHEDULE_CREATE = {
  name: 'schedule create',
  usage: ['<schedule-id> --domain D (--every DURATION | --cron EXPR | --window HH:MM-HH:MM) [options]'],
  summary: 'a schedule of snapshots of one VM, with retention',
  about: `Creates a Temporal Schedule that starts consistentSnapshot for D by name on the fleet queue
vmsnap: each run finds the host D runs on then, so the schedule follows D through migrations
(--host ID pins it to that host's queue vmsnap-<ID> instead). Each run labels its images
vmsnap.label.schedule=<schedule-id>; with a retention policy (--keep-…), after every successful
run the schedule's older images of D are pruned — only images carrying that label,
vmsnap.owner=vmsnap and D's UUID, never others.`,
  options: {
    domain: { type: 'string', arg: 'D', help: 'the libvirt domain to snapshot (required)' },
    ...SPEC,
    ...KEEP,
    'verify-every': {
      type: 'string',
      arg: 'N',
      help: 'after a run, vmsnap verify its image set when none of the N-1 runs of this schedule before it was verified (1: every run); the verdict is in the run\'s result and on the images; a failed one does not fail the run',
    },
    'verify-check': { type: 'string', arg: "'CMD ARGS'", help: 'with --verify-every: run in the copy (as vmsnap verify --check)' },
    ...OVERLAP,
    ...CATCHUP,
    'pause-on-failure': { type: 'boolean', help: 'pause the schedule when a run fails' },
    paused: { type: 'boolean', help: 'create it paused' },
    ...NOTE,
    ...SNAPSHOT_INPUT,
    ...PIN_HOST,
    ...COMMON,
  },
} as const satisfies CommandSpec;

export const SCHEDULE_UPDATE = {
  name: 'schedule update',
  usage: ['<schedule-id> [--every DURATION | --cron EXPR | --window HH:MM-HH:MM] [--keep-… | --no-retention] [options]'],
  summary: "change a schedule's spec, retention or policies in place",
  about: `Changes a vmsnap schedule in place (Temporal's UpdateSchedule): its runs so far, its counts and
its paused state stay. Only what is given changes: a new --every, --cron or --window replaces the
spec (--timezone alone changes the zone of the current one); any --keep-… flag replaces the whole
retention policy with the tiers given (--no-retention removes it: images are then kept); the
overlap, catch-up and pause-on-failure policies. The next run uses the new retention; the domain,
the host and the snapshot flags stay (delete and create the schedule to change those). The new
run input is checked as create checks it, before anything is sent.`,
  options: {
    ...SPEC,
    ...KEEP,
    'no-retention': { type: 'boolean', help: 'remove the retention policy (the schedule then keeps every image)' },
    ...OVERLAP,
    ...CATCHUP,
    'pause-on-failure': { type: 'boolean', help: 'pause the schedule when a run fails' },
    'no-pause-on-failure': { type: 'boolean', help: 'stop pausing the schedule when a run fails' },
    ...COMMON,
  },
} as const satisfies CommandSpec;

export const SCHEDULE_LIST = {
  name: 'schedule list',
  usage: ['[--domain D] [options]'],
  summary: "vmsnap's schedules: id, domain, spec, state, next run",
  about: "Lists vmsnap's schedules (those starting consistentSnapshot): id, domain, spec, state, next run.",
  options: { domain: { type: 'string', arg: 'D', help: "only this domain's schedules" }, ...COMMON },
} as const satisfies CommandSpec;

export const SCHEDULE_DESCRIBE = {
  name: 'schedule describe',
  usage: ['<schedule-id> [options]'],
  summary: 'spec, policies, retention, state, counts, next and recent runs',
  about: 'Spec, overlap policy, retention, state, counts, next runs, and the recent runs with their status.',
  options: COMMON,
} as const satisfies CommandSpec;

export const SCHEDULE_PAUSE = {
  name: 'schedule pause',
  usage: ['<schedule-id> [--note TEXT] [options]'],
  summary: 'stop starting runs (a run in progress finishes)',
  about: 'Stops starting new runs; a run in progress finishes. Unpause to resume.',
  options: { ...NOTE, ...COMMON },
} as const satisfies CommandSpec;

export const SCHEDULE_UNPAUSE = {
  name: 'schedule unpause',
  usage: ['<schedule-id> [--note TEXT] [options]'],
  summary: 'start runs again',
  about: 'Resumes a paused schedule.',
  options: { ...NOTE, ...COMMON },
} as const satisfies CommandSpec;

export const SCHEDULE_TRIGGER = {
  name: 'schedule trigger',
  usage: ['<schedule-id> [--wait] [--overlap skip|buffer-one|allow-all] [options]'],
  summary: 'start a run now',
  about: `Starts a run now (retention applies after it as after any run). With the default overlap policy
the trigger is skipped while a run is in progress.`,
  options: {
    wait: { type: 'boolean', help: 'wait for the run and print its result; exit code as for vmsnap snapshot --wait' },
    overlap: { ...OVERLAP.overlap, help: "overlap policy for this trigger only (default: the schedule's)" },
    ...COMMON,
  },
} as const satisfies CommandSpec;

export const SCHEDULE_DELETE = {
  name: 'schedule delete',
  usage: ['<schedule-id> [options]'],
  summary: 'delete a schedule (its images stay)',
  about: `Deletes the schedule. A run in progress finishes; the images it made stay (vmsnap never deletes
images outside a schedule's retention, vmsnap prune and vmsnap delete).`,
  options: COMMON,
} as const satisfies CommandSpec;

export const SCHEDULE = {
  name: 'schedule',
  usage: ['<create|update|list|describe|pause|unpause|trigger|delete> [options]'],
  summary: 'periodic snapshots with retention (create|update|list|describe|pause|unpause|trigger|delete)',
  about: `Periodic snapshots of a domain as Temporal Schedules, with retention (--keep-last N,
--keep-daily D, --keep-weekly W, --keep-monthly M) applied after each successful run to that
schedule's own images only.`,
  options: { ...HELP },
  subcommands: {
    create: SCHEDULE_CREATE,
    update: SCHEDULE_UPDATE,
    list: SCHEDULE_LIST,
    describe: SCHEDULE_DESCRIBE,
    pause: SCHEDULE_PAUSE,
    unpause: SCHEDULE_UNPAUSE,
    trigger: SCHEDULE_TRIGGER,
    delete: SCHEDULE_DELETE,
  },
} as const satisfies CommandSpec;
