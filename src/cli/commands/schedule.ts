import { CliError, Exit } from '../exit-codes';
import { create } from '../schedule/create';
import { describe, list } from '../schedule/inspect';
import { remove, setPaused, trigger } from '../schedule/control';

const HELP = `Usage: vmsnap schedule <create|list|describe|pause|unpause|trigger|delete> [options]

Periodic snapshots of a domain as Temporal Schedules, with retention (keep-last N, keep-daily D)
applied after each successful run to that schedule's own images only.

  create <id> --domain D (--every 1h | --cron '0 3 * * *') [--keep-last N] [--keep-daily D] ...
  list [--domain D]
  describe <id>
  pause <id> [--note TEXT]
  unpause <id> [--note TEXT]
  trigger <id> [--wait]
  delete <id>

vmsnap schedule <subcommand> --help for each one's options.`;

const SUBCOMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  create,
  list,
  describe,
  pause: setPaused(true),
  unpause: setPaused(false),
  trigger,
  delete: remove,
};

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    process.stdout.write(HELP + '\n');
    return sub ? Exit.ok : Exit.badInput;
  }
  const fn = SUBCOMMANDS[sub];
  if (!fn) throw new CliError(`unknown schedule subcommand "${sub}"\n\n${HELP}`, Exit.badInput);
  return fn(rest);
}
