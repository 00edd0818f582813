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
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { describeFailure, exitCodeFor } from '../failure-exit';
import { emit } from '../output';
import { followProgress } from './snapshot';
import { connectClient } from '../temporal-client';

const HELP = `Usage: vmsnap restore <domain> [--from RUN|latest] [--as NEW-NAME | --stop] [options]
       vmsnap restore <domain> --confirm RESTORE-WORKFLOW-ID

Starts the restoreVm workflow on the fleet queue: the image set is chosen once, its VM is found
by UUID on every live host, and the restore runs on that VM's host, holding the VM's domain lock
(in place) as snapshot runs do. --host pins it to that host's queue instead. <domain> is the VM the
image set was taken of (as "vmsnap list <domain>" shows it).

  --from RUN|latest        the snapshot run's workflow id, or the newest restorable set (default)
  --as NEW-NAME            a new VM: the recorded definition with a new name, UUID and MAC
                           addresses, disks <NEW-NAME>-<target> cloned from the images, started,
                           ready when its guest agent answers. The original VM is not touched.
  (no --as)                in place: the VM must be shut off (on every host); each disk is replaced by a clone
                           of its image (<disk>-r<id>), the previous disks are kept until
                           --confirm, and the VM is started
  --stop                   in place: shut a running VM down first (guest agent, then ACPI)
  --shutdown-timeout-ms N  for --stop (default 120000); on timeout the VM is left running
  --ready-timeout-ms N     how long to wait for the restored VM's agent (default 180000)
  --flatten                flatten the restored disks (independent of the images)
  --verify                 compare each restored disk's sha256 with its image before starting
  --vm-pool POOL           pool for the restored disks (default: the VM's disks' pool)
  --pool POOL              image pool (default: the configured image pool, "images")
  --workflow-id ID         default restore-<domain>-<UTC timestamp>; re-running an id finishes it
  --wait                   follow the run and print its result
  --confirm ID             remove the disks that in-place restore ID replaced, once ID has
                           COMPLETED; run it on the VM's host (no workflow)
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    from: { type: 'string' },
    as: { type: 'string' },
    stop: { type: 'boolean' },
    flatten: { type: 'boolean' },
    verify: { type: 'boolean' },
    'vm-pool': { type: 'string' },
    pool: { type: 'string' },
    'shutdown-timeout-ms': { type: 'string' },
    'ready-timeout-ms': { type: 'string' },
    'workflow-id': { type: 'string' },
    wait: { type: 'boolean' },
    confirm: { type: 'string' },
  });
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
  if (positionals.length !== 1) throw new CliError('restore takes exactly one domain (see --help)', Exit.badInput);
  const config = configFrom(values);
  if (values.confirm !== undefined) return confirm(positionals[0]!, values.confirm, config, !!values.json);

  const request: RestoreRequest = {
    domain: positionals[0]!,
    from: values.from ?? 'latest',
    ...(values.as !== undefined ? { as: values.as } : {}),
    stop: !!values.stop,
    flatten: !!values.flatten,
    verify: !!values.verify,
    imagePool: values.pool ?? config.imagePool,
    ...(values['vm-pool'] !== undefined ? { vmPool: values['vm-pool'] } : {}),
    ...(values['shutdown-timeout-ms'] !== undefined ? { shutdownTimeoutMs: Number(values['shutdown-timeout-ms']) } : {}),
    ...(values['ready-timeout-ms'] !== undefined ? { readyTimeoutMs: Number(values['ready-timeout-ms']) } : {}),
  };
  const parsed = parseRestoreInput(request);
  if (!parsed.ok) throw new CliError(`invalid restore request: ${parsed.message}`, Exit.badInput);
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
      staticDetails: `flatten=${parsed.input.flatten}, verify=${parsed.input.verify}, ${pinned ? `host ${config.host}` : 'on the VM’s host'}`,
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
    const desc = await handle.describe().catch((err: Error) => {
      throw new CliError(`--confirm ${workflowId}: no such restore (${err.message})`, Exit.badInput);
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
