import { progressQuery } from '../../../workflows/progress';
import { COMMON_HELP, configFrom, parseSingle } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit, progressBar } from '../output';
import { closeConnection, connectClient } from '../temporal-client';

const HELP = `Usage: vmsnap status <workflow-id>

Shows a run's status, phase, flatten progress and, when finished, its result.
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseSingle(argv, HELP, 'status', 'workflow id');
  if (!parsed) return Exit.ok;
  const { values, arg } = parsed;
  const client = await connectClient(configFrom(values));
  try {
    const handle = client.workflow.getHandle(arg);
    let desc;
    try {
      desc = await handle.describe();
    } catch (err) {
      throw new CliError(`no workflow ${arg}: ${(err as Error).message}`, Exit.badInput);
    }
    const status = desc.status.name;
    const progress = status === 'RUNNING' ? await handle.query(progressQuery).catch(() => undefined) : undefined;
    const result = status === 'COMPLETED' ? await handle.result() : undefined;
    const out = { workflowId: desc.workflowId, runId: desc.runId, status, taskQueue: desc.taskQueue, progress, result };
    emit(!!values.json, out, () => {
      const lines = [`${desc.workflowId}: ${status}`];
      if (progress) {
        lines.push(`  phase: ${progress.phase}`);
        for (const [t, d] of Object.entries(progress.disks)) lines.push(`  flatten ${t} ${progressBar(d.percent)}`);
      }
      if (result) lines.push(`  ${JSON.stringify(result)}`);
      return lines.join('\n');
    });
    return status === 'FAILED' ? Exit.failed : status === 'CANCELLED' ? Exit.cancelled : status === 'TERMINATED' ? Exit.terminated : Exit.ok;
  } finally {
    await closeConnection(client.connection);
  }
}
