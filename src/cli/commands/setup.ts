import { prepareSearchAttributes, temporalCliFor } from '../../temporal-setup';
import { SEARCH_ATTRIBUTE_TYPES } from '../../model/search-attributes';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { closeConnection, openConnection } from '../temporal-client';
import { recordNamespace } from '../temporal-client-namespace';

const HELP = `Usage: vmsnap setup [options]

Prepares the Temporal namespace for vmsnap: registers the search attributes its runs and
schedules carry (${Object.entries(SEARCH_ATTRIBUTE_TYPES).map(([k, t]) => `${k} ${t}`).join(', ')})
where they are missing, with the operator service's AddSearchAttributes. Idempotent: on a
prepared namespace it registers nothing and exits 0. Run it once per namespace, before the first
worker starts; it needs a client the server lets call the operator service.
${COMMON_HELP}

Exit code: 0 prepared, 1 a search attribute has another type or the server refused to add one,
4 Temporal unreachable.`;

export async function run(argv: string[]): Promise<number> {
  const { values } = parse(argv, {}, false);
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
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
      throw new CliError(`cannot register vmsnap's search attributes on namespace "${namespace}": ${(err as Error).message}; or run: ${temporalCliFor(Object.keys(SEARCH_ATTRIBUTE_TYPES), namespace)}`, Exit.failed);
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
