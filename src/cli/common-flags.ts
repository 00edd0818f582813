import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig } from '../config';
import type { Config, ConfigOverrides } from '../config';
import { CliError, Exit } from './exit-codes';

export const COMMON_OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  json: { type: 'boolean' },
  config: { type: 'string' },
  'temporal-address': { type: 'string' },
  namespace: { type: 'string' },
  'libvirt-uri': { type: 'string' },
  'libvirt-ro-uri': { type: 'string' },
  'ceph-conf': { type: 'string' },
  'ceph-id': { type: 'string' },
  'ceph-keyring': { type: 'string' },
  host: { type: 'string' },
  'state-dir': { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

export const COMMON_HELP = `Common options:
  --json                   machine-readable output
  --config FILE            JSON config file (also VMSNAP_CONFIG)
  --temporal-address H:P   (VMSNAP_TEMPORAL_ADDRESS, default 127.0.0.1:7233)
  --namespace NS           (VMSNAP_TEMPORAL_NAMESPACE, default "default")
  --libvirt-uri URI        (VMSNAP_LIBVIRT_URI / LIBVIRT_DEFAULT_URI)
  --libvirt-ro-uri URI     read-only, for inspection (VMSNAP_LIBVIRT_RO_URI; default: libvirt-sock-ro)
  --ceph-conf FILE --ceph-id ID --ceph-keyring FILE
  --host ID                hypervisor host id; selects the task queue vmsnap-<host>
  --state-dir DIR          host state (freeze journal), default /var/lib/vmsnap
  -h, --help`;

export function parse<O extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: O, allowPositionals = true) {
  try {
    return parseArgs({ args: argv, options: { ...COMMON_OPTIONS, ...options }, allowPositionals, strict: true });
  } catch (err) {
    throw new CliError(`${(err as Error).message} (see --help)`, Exit.badInput);
  }
}

/**
 * A command with one positional argument and only the common flags: prints `help` and returns
 * undefined on --help, refuses any other count of arguments with exit 2.
 */
export function parseSingle(argv: string[], help: string, command: string, what: string) {
  const { values, positionals } = parse(argv, {});
  if (values.help) {
    process.stdout.write(help + '\n');
    return undefined;
  }
  if (positionals.length !== 1) throw new CliError(`${command} takes exactly one ${what}`, Exit.badInput);
  return { values, arg: positionals[0]! };
}

export function configFrom(values: Record<string, unknown>): Config {
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
    if (err instanceof ConfigError) throw new CliError(err.message, Exit.badInput);
    throw err;
  }
}
