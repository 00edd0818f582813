import { CEPH, CONFIG, HELP, JSON_OUTPUT, TEMPORAL } from '../options';
import type { CommandSpec } from '../options';
import { KEEP } from './retention';

const POOL = { pool: { type: 'string', arg: 'POOL', help: 'image pool (default: the configured image pool, "images")' } } as const;

export const LIST = {
  name: 'list',
  usage: ['[<domain>] [--domain D ...] [--quiesced true|false] [--since DURATION|TIME] [options]'],
  summary: 'image sets, newest first: one VM\'s, or every VM\'s (what restore can use)',
  about: `The image sets vmsnap made, read from the images' RBD metadata straight from Ceph (no
Temporal needed): with <domain> (a name or UUID) that VM's, else every VM's, grouped by VM. Each
set: time, the run's workflow id, quiesced, disks → images and sizes, schedule, whether it can be
restored, and the last "vmsnap verify" verdict on it; newest first.`,
  options: {
    domain: { type: 'string', multiple: true, arg: 'D', help: "only this VM's sets (a name or UUID)" },
    quiesced: { type: 'string', choices: ['true', 'false'], help: 'only sets that were (true) or were not (false) quiesced' },
    since: { type: 'string', arg: 'DURATION|TIME', help: 'only sets made in the last DURATION (24h, 7d) or since TIME (2026-12-01, 2026-12-01T03:00:00Z)' },
    schedule: { type: 'string', arg: 'ID', help: "only this schedule's sets" },
    ...POOL,
    ...JSON_OUTPUT,
    ...CONFIG,
    ...CEPH,
    ...HELP,
  },
} as const satisfies CommandSpec;

const SCOPE_NOTE = `Only sets vmsnap made, as those very images, of that VM (by its UUID), in this Temporal
namespace and fleet are touched: the same rule as a schedule's retention. Telling the fleet
needs Temporal (its namespace id), unless fleetId is configured.`;

export const DELETE = {
  name: 'delete',
  usage: ['<domain> --run RUN [--dry-run] [options]'],
  summary: 'delete one image set of a VM (ownership checked as retention does)',
  about: `Removes the image set run RUN made of <domain> (a name or UUID): every image of the set, with
its snapshot. Everything is checked before the first removal; nothing is removed when the set is
not found (SetNotFound), belongs to another VM or to no run of this namespace and fleet
(NotOwned), is unfinished (SetIncomplete: a run may still be making it) or in use (SetInUse: a
clone hangs off an image, e.g. a restored disk not yet flattened, or someone else added a
snapshot). Each image is checked again just before it is removed.

${SCOPE_NOTE}`,
  options: {
    run: { type: 'string', arg: 'RUN', help: "the set's run: its workflow id, as vmsnap list shows it (required)" },
    'dry-run': { type: 'boolean', help: 'check everything and print what would be removed; remove nothing' },
    ...POOL,
    ...JSON_OUTPUT,
    ...CONFIG,
    ...TEMPORAL,
    ...CEPH,
    ...HELP,
  },
  notes: `Exit code: 0 removed (or, with --dry-run, removable), 1 removal failed part-way (what was
removed and what was left is printed), 2 refused (nothing removed), 4 Temporal or Ceph
unreachable, 6 the cephx key may not do it.`,
} as const satisfies CommandSpec;

export const PRUNE = {
  name: 'prune',
  usage: ['<domain> --keep-last N|--keep-daily D|--keep-weekly W|--keep-monthly M ... [--dry-run] [options]'],
  summary: "apply a retention policy to a VM's image sets now (--dry-run: say what and why)",
  about: `Applies retention on demand, as a schedule's runs do after each success: the VM's image sets
are kept when any --keep-… tier keeps them, the newest complete set always, unfinished or
undatable sets always; the rest are removed. With --schedule, only that schedule's sets are
considered (and counted). An image in use (clones hang off it, or extra snapshots) is skipped and
reported, never forced. With --dry-run it prints every set with "keep" and the tiers that keep
it, or "remove", and removes nothing.

${SCOPE_NOTE}
When <domain> is a name two VMs carried (one deleted and recreated), give the UUID
(AmbiguousDomain).`,
  options: {
    ...KEEP,
    schedule: { type: 'string', arg: 'ID', help: "only this schedule's sets" },
    'dry-run': { type: 'boolean', help: 'print what would be kept (and why) and removed; remove nothing' },
    ...POOL,
    ...JSON_OUTPUT,
    ...CONFIG,
    ...TEMPORAL,
    ...CEPH,
    ...HELP,
  },
  notes: `Exit code: 0 done (images in use are reported, not an error), 1 a removal failed, 2 bad flags or
a refused request (nothing removed), 4 Temporal or Ceph unreachable, 6 the cephx key may not do it.`,
} as const satisfies CommandSpec;
