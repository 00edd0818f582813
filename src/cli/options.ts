import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { DurationError, parseDuration } from './durations';
import type { DurationRule } from './durations';
import { CliError, Exit } from './exit-codes';

/*
 * One option table per command: parseArgs reads it, --help prints it, `vmsnap completion` turns
 * it into shell completion. A flag that is not in a command's table does not apply to it, and
 * parsing refuses it (exit 2) instead of ignoring it.
 */

export interface Option {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
  /** The value's placeholder in help: N, FILE, DURATION... */
  readonly arg?: string;
  readonly help: string;
  /** The only values accepted; completion offers them. */
  readonly choices?: readonly string[];
  /** What completion offers for the value when there are no choices. */
  readonly complete?: 'file' | 'dir';
  /**
   * A duration (durations.ts): parsed to ms while parsing, into `ms[name]`. `legacy` is the old
   * spelling of the flag, whose bare numbers are in `legacy.unit`; it is accepted, not shown.
   */
  readonly duration?: Omit<DurationRule, 'bare'> & { readonly legacy?: { readonly flag: string; readonly unit: 'ms' | 's' } };
}

export type OptionTable = Readonly<Record<string, Option>>;

/** A command or subcommand: its usage, its text and its table. */
export interface CommandSpec {
  /** As typed: `snapshot`, `schedule create`. */
  readonly name: string;
  /** Usage lines after `vmsnap <name> `, e.g. `<domain> [options]`. */
  readonly usage: readonly string[];
  /** One line, for `vmsnap --help`'s command list. */
  readonly summary: string;
  readonly about: string;
  readonly options: OptionTable;
  /** Printed after the options (exit codes, examples). */
  readonly notes?: string;
  /** A command made of subcommands (`schedule`, `fleet`, `completion`). */
  readonly subcommands?: Readonly<Record<string, CommandSpec>>;
}

type ValueOf<O extends Option> = O['type'] extends 'boolean'
  ? O['multiple'] extends true ? boolean[] : boolean
  : O['multiple'] extends true ? string[] : string;

export type Values<T extends OptionTable> = { -readonly [K in keyof T]?: ValueOf<T[K]> };

type DurationKeys<T extends OptionTable> = { [K in keyof T]: T[K]['duration'] extends object ? K : never }[keyof T];

export interface Parsed<T extends OptionTable> {
  values: Values<T>;
  positionals: string[];
  /** Every duration flag given, in ms, whichever spelling was used. */
  ms: { -readonly [K in DurationKeys<T>]?: number };
}

// ---- flag groups, each taken only by the commands that use it ----

export const HELP = {
  help: { type: 'boolean', short: 'h', help: 'this help' },
} as const satisfies OptionTable;

export const JSON_OUTPUT = {
  json: { type: 'boolean', help: 'one JSON document on stdout, an error too ({"error":{...}})' },
} as const satisfies OptionTable;

export const CONFIG = {
  config: { type: 'string', arg: 'FILE', complete: 'file', help: 'JSON config file (also VMSNAP_CONFIG)' },
} as const satisfies OptionTable;

export const TEMPORAL = {
  'temporal-address': { type: 'string', arg: 'HOST:PORT', help: 'Temporal frontend (VMSNAP_TEMPORAL_ADDRESS; default 127.0.0.1:7233)' },
  namespace: { type: 'string', arg: 'NS', help: 'Temporal namespace (VMSNAP_TEMPORAL_NAMESPACE; default "default")' },
} as const satisfies OptionTable;

export const LIBVIRT_RW = {
  'libvirt-uri': { type: 'string', arg: 'URI', help: "this host's libvirtd (VMSNAP_LIBVIRT_URI / LIBVIRT_DEFAULT_URI)" },
} as const satisfies OptionTable;

export const LIBVIRT = {
  ...LIBVIRT_RW,
  'libvirt-ro-uri': { type: 'string', arg: 'URI', help: 'read-only connection, for inspection (VMSNAP_LIBVIRT_RO_URI; default: libvirt-sock-ro)' },
} as const satisfies OptionTable;

export const CEPH = {
  'ceph-conf': { type: 'string', arg: 'FILE', complete: 'file', help: 'ceph.conf (VMSNAP_CEPH_CONF)' },
  'ceph-id': { type: 'string', arg: 'ID', help: 'cephx client id (VMSNAP_CEPH_ID)' },
  'ceph-keyring': { type: 'string', arg: 'FILE', complete: 'file', help: 'its keyring (VMSNAP_CEPH_KEYRING)' },
} as const satisfies OptionTable;

export const HOST_ID = {
  host: { type: 'string', arg: 'ID', help: "this hypervisor's host id (VMSNAP_HOST; default: the hostname)" },
} as const satisfies OptionTable;

export const PIN_HOST = {
  host: { type: 'string', arg: 'ID', help: "run on that host's queue vmsnap-<ID> instead of wherever the VM runs" },
} as const satisfies OptionTable;

export const STATE_DIR = {
  'state-dir': { type: 'string', arg: 'DIR', complete: 'dir', help: 'host state (freeze journal) (VMSNAP_STATE_DIR; default /var/lib/vmsnap)' },
} as const satisfies OptionTable;

/** What every command that talks to Temporal takes. */
export const TEMPORAL_COMMAND = { ...JSON_OUTPUT, ...CONFIG, ...TEMPORAL } as const;

// ---- parsing ----

/**
 * Parses `argv` by `spec.options`. On --help prints the help and returns undefined. Unknown
 * flags, a value outside `choices`, a bad duration: CliError exit 2, before anything is contacted.
 */
export function parseCommand<T extends OptionTable>(spec: CommandSpec & { options: T }, argv: string[]): Parsed<T> | undefined {
  const config: NonNullable<ParseArgsConfig['options']> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    config[name] = { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) };
    if (o.duration?.legacy) config[o.duration.legacy.flag] = { type: 'string' };
  }
  // Help first: a user asking which flags apply may not know them yet.
  const end = argv.indexOf('--');
  if ((end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h')) {
    process.stdout.write(helpText(spec) + '\n');
    return undefined;
  }
  let raw: { values: Record<string, unknown>; positionals: string[] };
  try {
    raw = parseArgs({ args: argv, options: config, allowPositionals: true, strict: true });
  } catch (err) {
    throw new CliError(`${(err as Error).message.replace(/\. To specify a positional argument.*$/s, '')} (vmsnap ${spec.name} --help lists the flags that apply)`, Exit.badInput, 'UnknownOption');
  }
  const ms: Record<string, number> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    if (o.choices) checkChoices(name, o.choices, raw.values[name]);
    if (!o.duration) continue;
    const legacy = o.duration.legacy;
    const given = raw.values[name] as string | undefined;
    const old = legacy ? (raw.values[legacy.flag] as string | undefined) : undefined;
    if (given !== undefined && old !== undefined) throw new CliError(`give --${name} or --${legacy!.flag}, not both`, Exit.badInput);
    if (given === undefined && old === undefined) continue;
    const [flag, text, bare] = given !== undefined ? [name, given, undefined] : [legacy!.flag, old!, legacy!.unit];
    try {
      ms[name] = parseDuration(text, { ...o.duration, bare });
    } catch (err) {
      if (err instanceof DurationError) throw new CliError(`--${flag} ${err.message}`, Exit.badInput);
      throw err;
    }
    delete raw.values[legacy?.flag ?? ''];
  }
  return { values: raw.values as Values<T>, positionals: raw.positionals, ms: ms as Parsed<T>['ms'] };
}

function checkChoices(name: string, choices: readonly string[], value: unknown): void {
  for (const v of value === undefined ? [] : Array.isArray(value) ? value : [value]) {
    if (!choices.includes(v as string)) throw new CliError(`--${name} must be one of ${choices.join(', ')}, got "${String(v)}"`, Exit.badInput);
  }
}

/** The subcommand `argv[0]` names, with its arguments; a missing or unknown one is exit 2. */
export function pickSubcommand(spec: CommandSpec, argv: string[]): { sub: CommandSpec; rest: string[] } | undefined {
  const subs = spec.subcommands ?? {};
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(helpText(spec) + '\n');
    return undefined;
  }
  const sub = name === undefined ? undefined : subs[name];
  if (!sub) {
    const what = name === undefined ? `vmsnap ${spec.name} needs a subcommand` : `unknown ${spec.name} subcommand "${name}"`;
    throw new CliError(`${what}: ${Object.keys(subs).join(', ')} (vmsnap ${spec.name} --help)`, Exit.badInput);
  }
  return { sub, rest };
}

// ---- help ----

const WRAP = 100;
const FLAG_COLUMN = 28;

/** The command's help: usage, text, then exactly the flags of its table. */
export function helpText(spec: CommandSpec): string {
  const usage = spec.usage.map((u, i) => `${i ? '       ' : 'Usage: '}vmsnap ${spec.name} ${u}`.trimEnd());
  const parts = [usage.join('\n'), spec.about];
  if (spec.subcommands) {
    const subs = Object.values(spec.subcommands).map((s) => [`${s.name.slice(spec.name.length + 1)} ${firstArg(s)}`.trimEnd(), s.summary] as const);
    const width = Math.max(...subs.map(([head]) => head.length)) + 2;
    parts.push(`Subcommands:\n${subs.map(([head, summary]) => `  ${head.padEnd(width)}${summary}`).join('\n')}\n\nvmsnap ${spec.name} <subcommand> --help for each one's options.`);
  }
  const rows = Object.entries(spec.options).map(([name, o]) => optionRow(name, o));
  if (rows.length) parts.push('Options:\n' + rows.join('\n'));
  if (Object.values(spec.options).some((o) => o.duration?.legacy)) {
    parts.push('Durations: 500ms, 90s, 30m, 1h30m, 1d. The older --…-ms and --…-s spellings still take plain numbers.');
  }
  if (spec.notes) parts.push(spec.notes);
  return parts.filter(Boolean).join('\n\n');
}

function firstArg(s: CommandSpec): string {
  const u = s.usage[0] ?? '';
  return u.startsWith('<') ? u.split(' ')[0]! : '';
}

function optionRow(name: string, o: Option): string {
  const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ` ${o.arg ?? (o.choices ? o.choices.join('|') : 'VALUE')}` : ''}`;
  const extra = o.multiple ? ' (repeatable)' : '';
  const lead = `  ${flag}`;
  const text = o.help + extra;
  if (lead.length + 2 > FLAG_COLUMN) return `${lead}\n${wrap(text, FLAG_COLUMN)}`;
  return wrap(text, FLAG_COLUMN, lead.padEnd(FLAG_COLUMN));
}

function wrap(text: string, indent: number, first = ' '.repeat(indent)): string {
  const lines: string[] = [];
  let line = first;
  for (const word of text.split(/\s+/)) {
    if (line.length > indent && line.length + 1 + word.length > WRAP) {
      lines.push(line.trimEnd());
      line = ' '.repeat(indent);
    }
    line += (line.length > indent ? ' ' : '') + word;
  }
  lines.push(line.trimEnd());
  return lines.join('\n');
}
