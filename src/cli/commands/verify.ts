import { WorkflowFailedError } from '@temporalio/client';
import { FLEET_TASK_QUEUE } from '../../model/fleet';
import { SA } from '../../model/search-attributes';
import { parseVerifyInput } from '../../model/verification';
import type { VerifyRequest, VerifyResult } from '../../model/verification';
import { configFrom, onePositional } from '../config-flags';
import { parseCommand } from '../options';
import { VERIFY } from '../specs/restore';
import { CliError, Exit } from '../exit-codes';
import { describeFailure, exitCodeFor } from '../failure-exit';
import { emit } from '../output';
import { followProgress } from './snapshot';
import { connectClient } from '../temporal-client';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(VERIFY, argv);
  if (!parsed) return Exit.ok;
  const { values, ms } = parsed;
  const domain = onePositional(parsed.positionals, 'verify', 'domain');
  const config = configFrom(values);
  const check = values.check?.split(/\s+/).filter(Boolean);
  const request: VerifyRequest = {
    domain,
    from: values.from ?? 'latest',
    imagePool: values.pool ?? config.imagePool,
    ...(check ? { check } : {}),
    ...(ms['check-timeout'] !== undefined ? { checkTimeoutMs: ms['check-timeout'] } : {}),
    ...(ms['ready-timeout'] !== undefined ? { readyTimeoutMs: ms['ready-timeout'] } : {}),
  };
  const checked = parseVerifyInput(request);
  if (!checked.ok) throw new CliError(`invalid verify request: ${checked.message}`, Exit.badInput, 'InvalidInput');
  const workflowId = values['workflow-id'] ?? `verify-${request.domain}-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}`;
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/.test(workflowId)) throw new CliError('invalid --workflow-id', Exit.badInput);

  const client = await connectClient(config);
  try {
    const handle = await client.workflow.start('verifySnapshot', {
      taskQueue: FLEET_TASK_QUEUE,
      workflowId,
      args: [request],
      staticSummary: `verify ${request.domain} from ${request.from}${check ? ` with ${check.join(' ')}` : ''}`,
      memo: { input: request },
      typedSearchAttributes: [
        { key: SA.domain, value: request.domain },
        { key: SA.phase, value: 'queued' },
      ],
    });
    if (!values.wait) {
      emit(!!values.json, { workflowId, runId: handle.firstExecutionRunId, taskQueue: FLEET_TASK_QUEUE }, () => `started ${workflowId} on ${FLEET_TASK_QUEUE}`);
      return Exit.ok;
    }
    const follow = followProgress(client, handle, !!values.json);
    try {
      const result = (await handle.result()) as VerifyResult;
      await follow.stop();
      emit(!!values.json, result, () => human(result));
      return result.verdict === 'verified' ? Exit.ok : Exit.failed;
    } catch (err) {
      await follow.stop();
      if (err instanceof WorkflowFailedError) {
        const d = describeFailure(err);
        emit(!!values.json, { workflowId, status: 'failed', ...d }, () => `FAILED ${workflowId}: [${d.type}] ${d.message}`);
        return exitCodeFor(err);
      }
      throw err;
    }
  } finally {
    await client.connection.close();
  }
}

function human(r: VerifyResult): string {
  const lines = [`${r.verdict.toUpperCase()}: ${r.domain.name}'s image set ${r.fromWorkflowId} (copy ${r.copy}, removed)${r.reason ? `: ${r.reason}` : ''}`];
  if (r.readyMs !== undefined) lines.push(`  agent answered ${(r.readyMs / 1000).toFixed(1)} s after the copy started`);
  if (r.check) lines.push(`  check ${r.check.argv.join(' ')}: ${r.check.code === null ? 'did not exit' : `exit ${r.check.code}`} after ${r.check.attempts} run(s), ${r.check.ms} ms`);
  return lines.join('\n');
}
