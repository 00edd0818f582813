import { WorkflowFailedError } from '@temporalio/client';
import { FLEET_TASK_QUEUE } from '../../model/fleet';
import { SA } from '../../model/search-attributes';
import { parseVerifyInput } from '../../model/verification';
import type { VerifyRequest, VerifyResult } from '../../model/verification';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { describeFailure, exitCodeFor } from '../failure-exit';
import { emit } from '../output';
import { followProgress } from './snapshot';
import { connectClient } from '../temporal-client';

const HELP = `Usage: vmsnap verify <domain> [--from RUN|latest] [--check 'COMMAND ARGS'] [options]

Proves an image set restores to a VM that works: starts the verifySnapshot workflow on the fleet
queue, which restores the set as a throw-away VM beside the source VM, or on the host with the
most room when the VM's memory does not fit there beyond its reserve (its own name
<domain>-verify-<id> and UUID, its own disks and console files, no network interfaces), waits for
its guest agent, optionally runs a check command in it through the agent, then removes the copy
and its disks whatever happened, and records the verdict on the image set ("vmsnap list" shows
it). The source VM and its disks are never touched.

  --from RUN|latest        the snapshot run's workflow id, or the newest restorable set (default)
  --check 'COMMAND ARGS'   run in the copy through guest-exec (split on spaces, no shell; the
                           agent searches PATH), again every 2 s until it exits 0 (services start
                           after the agent answers), e.g. --check 'pg_isready -q'
  --check-timeout-ms N     how long the check may keep failing (default 60000); then: failed
  --ready-timeout-ms N     how long the copy may take until its agent answers (default 300000)
  --pool POOL              image pool (default: the configured image pool, "images")
  --workflow-id ID         default verify-<domain>-<UTC timestamp>
  --wait                   follow the run and print the verdict

Exit codes with --wait: 0 verified, 1 failed verdict (or a failed run), 2 bad input (nothing
started), 4 Temporal, Ceph or libvirt unreachable.
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    from: { type: 'string' },
    check: { type: 'string' },
    'check-timeout-ms': { type: 'string' },
    'ready-timeout-ms': { type: 'string' },
    pool: { type: 'string' },
    'workflow-id': { type: 'string' },
    wait: { type: 'boolean' },
  });
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
  if (positionals.length !== 1) throw new CliError('verify takes exactly one domain (see --help)', Exit.badInput);
  const config = configFrom(values);
  const check = values.check?.split(/\s+/).filter(Boolean);
  const request: VerifyRequest = {
    domain: positionals[0]!,
    from: values.from ?? 'latest',
    imagePool: values.pool ?? config.imagePool,
    ...(check ? { check } : {}),
    ...(values['check-timeout-ms'] !== undefined ? { checkTimeoutMs: Number(values['check-timeout-ms']) } : {}),
    ...(values['ready-timeout-ms'] !== undefined ? { readyTimeoutMs: Number(values['ready-timeout-ms']) } : {}),
  };
  const parsed = parseVerifyInput(request);
  if (!parsed.ok) throw new CliError(`invalid verify request: ${parsed.message}`, Exit.badInput);
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
