import { bashCompletion, zshCompletion } from '../completion';
import { CliError, Exit } from '../exit-codes';
import { parseCommand, pickSubcommand } from '../options';
import { COMMAND_SPECS } from '../specs';
import { COMPLETION } from '../specs/completion';

export async function run(argv: string[]): Promise<number> {
  const picked = pickSubcommand(COMPLETION, argv);
  if (!picked) return Exit.ok;
  const parsed = parseCommand(picked.sub, picked.rest);
  if (!parsed) return Exit.ok;
  if (parsed.positionals.length) throw new CliError(`${picked.sub.name} takes no arguments`, Exit.badInput);
  process.stdout.write(picked.sub === COMPLETION.subcommands.zsh ? zshCompletion(COMMAND_SPECS) : bashCompletion(COMMAND_SPECS));
  return Exit.ok;
}
