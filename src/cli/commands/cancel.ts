import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { connectClient } from '../temporal-client';

const HELP = `Usage: vmsnap cancel <workflow-id>

Requests cancellation. The run's compensations (thaw first, then removal of partial clones and
temporary snapshots) run to completion before it ends as cancelled.
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {});
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
  if (positionals.length !== 1) throw new CliError('cancel takes exactly one workflow id', Exit.badInput);
  const client = await connectClient(configFrom(values));
  try {
    try {
      await client.workflow.getHandle(positionals[0]).cancel();
    } catch (err) {
      throw new CliError(`cannot cancel ${positionals[0]}: ${(err as Error).message}`, Exit.badInput);
    }
    emit(!!values.json, { workflowId: positionals[0], cancelRequested: true }, () => `cancel requested for ${positionals[0]}`);
    return Exit.ok;
  } finally {
    await client.connection.close();
  }
}
