import { Exit } from '../exit-codes';
import { helpText, pickSubcommand } from '../options';
import { create } from '../schedule/create';
import { describe, list } from '../schedule/inspect';
import { remove, setPaused, trigger } from '../schedule/control';
import { update } from '../schedule/update';
import { SCHEDULE } from '../specs/schedule';

const SUBCOMMANDS: Record<keyof typeof SCHEDULE.subcommands, (argv: string[]) => Promise<number>> = {
  create,
  update,
  list,
  describe,
  pause: setPaused(true),
  unpause: setPaused(false),
  trigger,
  delete: remove,
};

export async function run(argv: string[]): Promise<number> {
  if (!argv.length) {
    process.stdout.write(helpText(SCHEDULE) + '\n');
    return Exit.badInput;
  }
  const picked = pickSubcommand(SCHEDULE, argv);
  if (!picked) return Exit.ok;
  return SUBCOMMANDS[picked.sub.name.split(' ')[1] as keyof typeof SUBCOMMANDS](picked.rest);
}
