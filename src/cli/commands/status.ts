import { progressQuery } from '../../../workflows/progress';
import { configFrom, onePositional } from '../config-flags';
import { Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit, progressBar } from '../output';
import { temporalFailure } from '../service-errors';
import { STATUS } from '../specs/status';
import { withClient } from '../temporal-client';

/** A closed run's exit code, the same as `snapshot --wait` gives for it. */
const EXIT_OF_STATUS: Record<string, number> = {
  FAILED: Exit.failed,
  CANCELLED: Exit.cancelled,
  TERMINATED: Exit.terminated,
  TIMED_OUT: Exit.terminated,
};

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(STATUS, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  const id = onePositional(parsed.positionals, 'status', 'workflow id');
  return withClient(configFrom(values), async (client) => {
    const handle = client.workflow.getHandle(id);
    const desc = await handle.describe().catch((err: unknown) => {
      throw temporalFailure(`cannot describe ${id}`, err);
    });
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
    return EXIT_OF_STATUS[status] ?? Exit.ok;
  });
}
