import { COMMON_HELP, configFrom, parseSingle } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { closeConnection, connectClient } from '../temporal-client';

const HELP = `Usage: vmsnap cancel <workflow-id>

Requests cancellation. The run's compensations (thaw first, then removal of partial clones and
temporary snapshots) run to completion before it ends as cancelled.
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseSingle(argv, HELP, 'cancel', 'workflow id');
  if (!parsed) return Exit.ok;
  const { values, arg } = parsed;
  const client = await connectClient(configFrom(values));
  try {
    try {
      await client.workflow.getHandle(arg).cancel();
    } catch (err) {
      throw new CliError(`cannot cancel ${arg}: ${(err as Error).message}`, Exit.badInput);
    }
    emit(!!values.json, { workflowId: arg, cancelRequested: true }, () => `cancel requested for ${arg}`);
    return Exit.ok;
  } finally {
    await closeConnection(client.connection);
  }
}
