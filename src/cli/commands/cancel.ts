import { configFrom, onePositional } from '../config-flags';
import { Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit } from '../output';
import { temporalFailure } from '../service-errors';
import { CANCEL } from '../specs/status';
import { withClient } from '../temporal-client';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(CANCEL, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  const id = onePositional(parsed.positionals, 'cancel', 'workflow id');
  return withClient(configFrom(values), async (client) => {
    await client.workflow
      .getHandle(id)
      .cancel()
      .catch((err: unknown) => {
        throw temporalFailure(`cannot cancel ${id}`, err);
      });
    emit(!!values.json, { workflowId: id, cancelRequested: true }, () => `cancel requested for ${id}`);
    return Exit.ok;
  });
}
