import { addonDrained } from '../ceph/addon-runtime';
import { NamespaceNotPreparedError, missingSearchAttributesIn } from '../temporal-namespace';
import { VERSION } from '../version';
import { CliError, Exit, exitCodeHelp } from './exit-codes';
import type { CommandSpec } from './options';
import { emitError } from './output';
import { cephExit, grpcCode, temporalExit } from './service-errors';
import { COMMAND_SPECS } from './specs';
import { namespaceDialed } from './temporal-client-namespace';

type Command = { run(argv: string[]): Promise<number> };

/*
 * Lazy, so `vmsnap thaw` never loads the Temporal client. require, not import(): bin/vmsnap.js
 * runs these sources through tsx's CommonJS hook, and an import() would reach Node's ESM loader,
 * which cannot load .ts files ("Cannot find module .../commands/status").
 */
const lazy = (name: string) => async (): Promise<Command> =>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require(`./commands/${name}`) as Command;

const COMMANDS: Record<string, () => Promise<Command>> = Object.fromEntries(COMMAND_SPECS.map((s) => [s.name, lazy(s.name)]));

function usage(): string {
  const head = (s: CommandSpec) => {
    if (s.subcommands) return `${s.name} <subcommand>`;
    const first = s.usage[0]?.split(' ')[0] ?? '';
    return `${s.name}${/^(<|\[<)/.test(first) ? ` ${first}` : ''}`;
  };
  const width = Math.max(...COMMAND_SPECS.map((s) => head(s).length)) + 2;
  return `vmsnap — application-consistent snapshots of libvirt guests on Ceph RBD, on Temporal

Usage: vmsnap <command> [options]   (vmsnap <command> --help: the command's flags)
       vmsnap --version

Commands:
${COMMAND_SPECS.map((s) => `  ${head(s).padEnd(width)} ${s.summary}`).join('\n')}

${exitCodeHelp()}
`;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(usage());
    return cmd ? Exit.ok : Exit.badInput;
  }
  if (cmd === '--version' || cmd === '-V' || cmd === 'version') {
    if (rest.length) throw new CliError(`${cmd} takes no arguments`, Exit.badInput);
    process.stdout.write(`vmsnap ${VERSION}\n`);
    return Exit.ok;
  }
  const load = COMMANDS[cmd];
  if (!load) throw new CliError(`unknown command "${cmd}" (vmsnap --help lists them)`, Exit.badInput, 'UnknownCommand');
  return (await load()).run(rest);
}

/**
 * The command is done: exit with its code. A client library may keep a reconnect timer or socket
 * alive after a failed connection (an unreachable Temporal, say); a scheduler waiting on us must
 * not wait on that, so after a short grace for stdout/stderr to drain the process exits anyway.
 */
function finish(code: number): void {
  process.exitCode = code;
  // The outcome is decided and printed: a library error surfacing after this (a timer of a closed
  // connection, say) is reported but must not turn a success into exit 1, or a failure into 0.
  process.on('uncaughtException', (err) => {
    process.stderr.write(`vmsnap: internal error after the command finished (exit ${code} stands): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(code);
  });
  // Ceph calls still on the addon's threads (handles closing behind a command) finish first.
  void addonDrained(5000).then(() => setTimeout(() => process.exit(code), 1000).unref());
}

/**
 * Every error leaves as a CliError with its exit code. A server refusing one of vmsnap's search
 * attributes means the namespace was never prepared: one line naming `vmsnap setup` instead of
 * the SDK's "Failed to start Workflow" and a gRPC dump, whichever command met it. A service error
 * no command translated still gets the code its kind has (service-errors.ts).
 */
function translate(err: unknown): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof NamespaceNotPreparedError) return new CliError(err.message, Exit.unreachable, 'NamespaceNotPrepared');
  const missing = missingSearchAttributesIn(err);
  if (missing) return new CliError(new NamespaceNotPreparedError(namespaceDialed(), missing).message, Exit.unreachable, 'NamespaceNotPrepared');
  const message = err instanceof Error ? err.message : String(err);
  const code = cephExit(err) ?? (grpcCode(err) !== undefined ? temporalExit(err) : Exit.failed);
  return new CliError(message, code);
}

/** `--json` anywhere among the flags (before a `--`): errors are then a JSON document too. */
function wantsJson(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).includes('--json');
}

const argv = process.argv.slice(2);
main(argv).then(finish, (raw: unknown) => {
  const err = translate(raw);
  emitError(wantsJson(argv), err);
  finish(err.exitCode);
});
