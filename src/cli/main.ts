import { addonDrained } from '../ceph/addon-runtime';
import { NamespaceNotPreparedError, missingSearchAttributesIn } from '../temporal-namespace';
import { VERSION } from '../version';
import { CliError, Exit } from './exit-codes';
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

const COMMANDS: Record<string, () => Promise<Command>> = {
  worker: lazy('worker'),
  snapshot: lazy('snapshot'),
  status: lazy('status'),
  cancel: lazy('cancel'),
  thaw: lazy('thaw'),
  schedule: lazy('schedule'),
  doctor: lazy('doctor'),
  setup: lazy('setup'),
  list: lazy('list'),
  restore: lazy('restore'),
  verify: lazy('verify'),
  fleet: lazy('fleet'),
  'arrival-guard': lazy('arrival-guard'),
};

const USAGE = `vmsnap — application-consistent snapshots of libvirt guests on Ceph RBD, on Temporal

Usage: vmsnap <command> [options]   (vmsnap <command> --help for details)
       vmsnap --version

Commands:
  worker                 run the host worker (workflows + activities for this hypervisor)
  snapshot <domain>      snapshot a domain (starts the workflow; --wait to follow it)
  status <workflow-id>   phase, progress and result of a run
  cancel <workflow-id>   cancel a run (its compensations thaw and clean up)
  thaw <domain>          emergency thaw of a guest on this host
  schedule <subcommand>  periodic snapshots with retention (create|list|describe|pause|unpause|trigger|delete)
  setup                  prepare the Temporal namespace for vmsnap (search attributes); idempotent
  doctor                 check Temporal, libvirt, guest agents, disks and Ceph; says how to fix
  list <domain>          a VM's image sets, newest first (what restore can use)
  restore <domain>       restore a VM from an image set, in place or --as a new VM (--confirm to drop kept disks)
  verify <domain>        prove an image set boots (and passes --check) as a throw-away VM; records the verdict
  fleet hosts|forget     the fleet registry: each host's state; retire a host gone for good
  arrival-guard <uuid>   (started by libvirt's hook) thaw a guest that migrated here frozen, at its deadline
`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(USAGE);
    return cmd ? Exit.ok : Exit.badInput;
  }
  if (cmd === '--version' || cmd === '-V' || cmd === 'version') {
    if (rest.length) throw new CliError(`${cmd} takes no arguments`, Exit.badInput);
    process.stdout.write(`vmsnap ${VERSION}\n`);
    return Exit.ok;
  }
  const load = COMMANDS[cmd];
  if (!load) throw new CliError(`unknown command "${cmd}"\n\n${USAGE}`, Exit.badInput);
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
 * A server refusing one of vmsnap's search attributes means the namespace was never prepared:
 * one line naming `vmsnap setup` instead of the SDK's "Failed to start Workflow" and a gRPC dump.
 * Whichever command met it (snapshot, list, schedule, restore, the worker), the fix is the same.
 */
function translate(err: unknown): unknown {
  if (err instanceof NamespaceNotPreparedError) return new CliError(err.message, Exit.unreachable);
  const missing = missingSearchAttributesIn(err);
  return missing ? new CliError(new NamespaceNotPreparedError(namespaceDialed(), missing).message, Exit.unreachable) : err;
}

main(process.argv.slice(2)).then(finish, (raw: unknown) => {
  const err = translate(raw);
  const code = err instanceof CliError ? err.exitCode : Exit.failed;
  process.stderr.write(`vmsnap: ${err instanceof Error ? err.message : String(err)}\n`);
  finish(code);
});
