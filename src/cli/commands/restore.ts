import { WorkflowFailedError } from '@temporalio/client';
import { hostTaskQueue } from '../../config';
import { FLEET_TASK_QUEUE } from '../../model/fleet';
import { connectLibvirt } from '../libvirt-session';
import { parseRestoreInput } from '../../model/restore-input';
import type { RestoreRequest } from '../../model/restore-input';
import type { RestoreResult } from '../../model/restore-point';
import { SA } from '../../model/search-attributes';
import { confirmRestore } from '../../restore/confirm';
import { withCeph } from '../ceph-session';
import { configFrom, onePositional } from '../config-flags';
import { parseCommand } from '../options';
import { RESTORE } from '../specs/restore';
import { temporalFailure } from '../service-errors';
import { CliError, Exit } from '../exit-codes';
import { describeFailure, exitCodeFor } from '../failure-exit';
import { emit } from '../output';
import { followProgress } from './snapshot';
import { connectClient } from '../temporal-client';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(RESTORE, argv);
  if (!parsed) return Exit.ok;
  const { values, ms } = parsed;
  const domain = onePositional(parsed.positionals, 'restore', 'domain');
  const config = configFrom(values);
  if (values.confirm !== undefined) return confirm(domain, values.confirm, config, !!values.json);

  const request: RestoreRequest = {
    domain,
    from: values.from ?? 'latest',
    ...(values.as !== undefined ? { as: values.as } : {}),
    stop: !!values.stop,
    flatten: !!values.flatten,
    verify: !!values.verify,
    imagePool: values.pool ?? config.imagePool,
    ...(values['vm-pool'] !== undefined ? { vmPool: values['vm-pool'] } : {}),
    ...(ms['shutdown-timeout'] !== undefined ? { shutdownTimeoutMs: ms['shutdown-timeout'] } : {}),
    ...(ms['ready-timeout'] !== undefined ? { readyTimeoutMs: ms['ready-timeout'] } : {}),
  };
  const checked = parseRestoreInput(request);
  if (!checked.ok) throw new CliError(`invalid restore request: ${checked.message}`, Exit.badInput, 'InvalidInput');
  const workflowId = values['workflow-id'] ?? `restore-${request.domain}-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}`;
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/.test(workflowId)) throw new CliError('invalid --workflow-id', Exit.badInput);

  const client = await connectClient(config);
  try {
    // A host named on the command line pins the restore there; otherwise the fleet finds the VM.
    const pinned = values.host !== undefined;
    const taskQueue = pinned ? hostTaskQueue(config.host) : FLEET_TASK_QUEUE;
    const mode = request.as ? `as new VM ${request.as}` : 'in place';
    const handle = await client.workflow.start('restoreVm', {
      taskQueue,
      workflowId,
      args: [request],
      staticSummary: `restore ${request.domain} from ${request.from} ${mode}`,
      staticDetails: `flatten=${checked.input.flatten}, verify=${checked.input.verify}, ${pinned ? `host ${config.host}` : 'on the VM’s host'}`,
      memo: { input: request },
      typedSearchAttributes: [
        { key: SA.domain, value: request.as ?? request.domain },
        ...(pinned ? [{ key: SA.host, value: config.host }] : []),
        { key: SA.phase, value: 'queued' },
      ],
    });
    if (!values.wait) {
      emit(!!values.json, { workflowId, runId: handle.firstExecutionRunId, taskQueue }, () => `started ${workflowId} on ${taskQueue}`);
      return Exit.ok;
    }
    const follow = followProgress(client, handle, !!values.json);
    try {
      const result = (await handle.result()) as RestoreResult;
      await follow.stop();
      emit(!!values.json, result, () => human(result));
      return Exit.ok;
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

async function confirm(domain: string, workflowId: string, config: ReturnType<typeof configFrom>, json: boolean): Promise<number> {
  const restored = await completedRestore(workflowId, config);
  if (domain !== restored.domain.name && domain.toLowerCase() !== restored.domain.uuid.toLowerCase()) {
    throw new CliError(`--confirm ${workflowId}: that restore is of ${restored.domain.name}, not ${domain}`, Exit.badInput);
  }
  const lv = await connectLibvirt(config.libvirt.uri);
  try {
    const out = await withCeph(config, (open) =>
      confirmRestore(lv, open, { ...config.ceph, timeoutMs: 10_000 }, restored.domain.uuid, workflowId).catch((err: Error) => {
        throw new CliError(`confirm ${workflowId} on ${domain}: ${err.message}`, Exit.badInput);
      }),
    );
    emit(json, { domain, workflowId, ...out }, () =>
      [...out.removed.map((d) => `removed ${d}`), ...out.kept.map((k) => `kept ${k.disk}: ${k.reason}`)].join('\n') || `${domain}: nothing replaced by ${workflowId}`,
    );
    return out.kept.length ? Exit.failed : Exit.ok;
  } finally {
    await lv.close();
  }
}

/**
 * The restore's result, only once it COMPLETED: a running restore may still swap a disk, and a
 * failed or terminated one is undone (or left for the operator): nothing it replaced is confirmed.
 */
async function completedRestore(workflowId: string, config: ReturnType<typeof configFrom>): Promise<RestoreResult> {
  const client = await connectClient(config);
  try {
    const handle = client.workflow.getHandle(workflowId);
    const desc = await handle.describe().catch((err: unknown) => {
      throw temporalFailure(`--confirm ${workflowId}: cannot read the restore`, err);
    });
    if (desc.type !== 'restoreVm') throw new CliError(`--confirm ${workflowId}: that is a ${desc.type} run, not a restore`, Exit.badInput);
    if (desc.status.name !== 'COMPLETED') {
      throw new CliError(`--confirm ${workflowId}: the restore is ${desc.status.name}; its replaced disks are confirmed only after it COMPLETED`, Exit.badInput);
    }
    const result = (await handle.result()) as RestoreResult;
    if (result.mode !== 'in-place') throw new CliError(`--confirm ${workflowId}: an --as restore replaces nothing`, Exit.badInput);
    const ranOn = desc.typedSearchAttributes.get(SA.host);
    if (ranOn !== undefined && ranOn !== config.host) {
      throw new CliError(`--confirm ${workflowId}: ${result.domain.name} was restored on ${ranOn}; run --confirm there (this is ${config.host})`, Exit.badInput);
    }
    return result;
  } finally {
    await client.connection.close();
  }
}

function human(r: RestoreResult): string {
  const lines = [`${r.reusedExisting ? 'already restored' : 'restored'}: ${r.domain.name} (${r.mode}) from ${r.from.workflowId} taken ${r.from.takenAt}, quiesced=${r.from.quiesced}`];
  for (const d of r.disks) lines.push(`  ${d.target}: ${d.disk} ← ${d.from}${d.previous ? ` (replaces ${d.previous})` : ''}`);
  if (r.kept.length) lines.push(`  kept until "vmsnap restore ${r.domain.name} --confirm ${r.workflowId}": ${r.kept.join(', ')}`);
  return lines.join('\n');
}
