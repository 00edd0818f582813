import { HELP } from '../options';
import type { CommandSpec } from '../options';

const shell = (name: 'bash' | 'zsh', how: string) =>
  ({
    name: `completion ${name}`,
    usage: ['[options]'],
    summary: `completion for ${name}`,
    about: `Prints vmsnap's ${name} completion: commands, subcommands, each one's flags and the values of
flags that take a fixed set, from the same option tables --help prints. ${how}`,
    options: { ...HELP },
  }) as const satisfies CommandSpec;

export const COMPLETION = {
  name: 'completion',
  usage: ['bash|zsh'],
  summary: 'shell completion for bash or zsh, from the commands\' option tables',
  about: 'Prints a completion script for the shell; it is generated from the option tables that parse each command.',
  options: { ...HELP },
  subcommands: {
    bash: shell('bash', 'Load it with: source <(vmsnap completion bash), or save it as /etc/bash_completion.d/vmsnap.'),
    zsh: shell('zsh', 'Load it with: source <(vmsnap completion zsh), or save it as _vmsnap in a directory of $fpath.'),
  },
} as const satisfies CommandSpec;
