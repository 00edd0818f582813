import { ConfigError, loadConfig } from '../config';
import type { Config, ConfigOverrides } from '../config';
import { CliError, Exit } from './exit-codes';

/** The config the command runs with: its flags over the environment over the config file. */
export function configFrom(values: Readonly<Record<string, unknown>>): Config {
  const s = (k: string) => values[k] as string | undefined;
  const flags: ConfigOverrides = {
    temporal: { address: s('temporal-address'), namespace: s('namespace') },
    libvirt: { uri: s('libvirt-uri'), readOnlyUri: s('libvirt-ro-uri') },
    ceph: { conf: s('ceph-conf'), id: s('ceph-id'), keyring: s('ceph-keyring') },
    host: s('host'),
    stateDir: s('state-dir'),
  };
  try {
    return loadConfig(flags, process.env, s('config') ?? process.env.VMSNAP_CONFIG);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(err.message, Exit.badInput, 'BadConfig');
    throw err;
  }
}

/** The one positional argument a command takes, or exit 2 naming it. */
export function onePositional(positionals: readonly string[], command: string, what: string): string {
  if (positionals.length !== 1) throw new CliError(`${command} takes exactly one ${what} (see --help)`, Exit.badInput);
  return positionals[0]!;
}
