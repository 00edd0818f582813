import { prepareSearchAttributes, temporalCliFor } from '../../temporal-setup';
import { SEARCH_ATTRIBUTE_TYPES } from '../../model/search-attributes';
import { configFrom } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit } from '../output';
import { temporalExit } from '../service-errors';
import { SETUP } from '../specs/setup';
import { closeConnection, openConnection } from '../temporal-client';
import { recordNamespace } from '../temporal-client-namespace';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(SETUP, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  if (parsed.positionals.length) throw new CliError('setup takes no arguments (see --help)', Exit.badInput);
  const config = configFrom(values);
  const { namespace, address } = config.temporal;
  recordNamespace(namespace);
  let conn;
  try {
    conn = await openConnection(config);
  } catch (err) {
    throw new CliError(`cannot reach Temporal at ${address}: ${(err as Error).message} (check --temporal-address / VMSNAP_TEMPORAL_ADDRESS / TEMPORAL_ADDRESS)`, Exit.unreachable);
  }
  try {
    const s = await prepareSearchAttributes(conn, namespace, true).catch((err: unknown) => {
      const code = temporalExit(err) === Exit.authRefused ? Exit.authRefused : Exit.failed;
      throw new CliError(`cannot register vmsnap's search attributes on namespace "${namespace}": ${(err as Error).message}; or run: ${temporalCliFor(Object.keys(SEARCH_ATTRIBUTE_TYPES), namespace)}`, code);
    });
    if (s.wrongType.length) {
      throw new CliError(
        `namespace "${namespace}" has ${s.wrongType.map((k) => `${k}`).join(', ')} with another type than vmsnap's (${s.wrongType.map((k) => `${k}=${SEARCH_ATTRIBUTE_TYPES[k]}`).join(', ')}): remove and re-add them`,
        Exit.failed,
      );
    }
    if (s.missing.length) throw new CliError(`the server accepted but did not register ${s.missing.join(', ')} on namespace "${namespace}"`, Exit.failed);
    emit(!!values.json, { namespace, address, added: s.added, present: s.present }, () =>
      s.added.length
        ? `prepared namespace "${namespace}" at ${address}: registered ${s.added.join(', ')}${s.present.length ? ` (already there: ${s.present.join(', ')})` : ''}`
        : `namespace "${namespace}" at ${address} is already prepared (${s.present.join(', ')}): nothing to do`,
    );
    return Exit.ok;
  } finally {
    await closeConnection(conn);
  }
}
