import { WorkflowFailedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { hostTaskQueue } from '../../config';
import { FLEET_TASK_QUEUE } from '../../model/fleet';
import { parseSnapshotInput } from '../../model/input';
import { SA } from '../../model/search-attributes';
import type { SnapshotResult } from '../../model/types';
import { progressQuery } from '../../../workflows/progress';
import type { ProgressView } from '../../../workflows/progress';
import { configFrom, onePositional } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit, progressBar } from '../output';
import { closeConnection, connectClient } from '../temporal-client';
import { describeFailure, exitCodeFor } from '../failure-exit';
import { buildRequest } from '../snapshot-flags';
import { SNAPSHOT } from '../specs/snapshot';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(SNAPSHOT, argv);
  if (!parsed) return Exit.ok;
  const { values, ms } = parsed;
  const domain = onePositional(parsed.positionals, 'snapshot', 'domain');
  const config = configFrom(values);
  const request = buildRequest(domain, values, ms, config.imagePool);
  const input = parseSnapshotInput(request);
  if (!input.ok) throw new CliError(`invalid snapshot request: ${input.message}`, Exit.badInput, 'InvalidInput');
  const workflowId = values['workflow-id'] ?? `snap-${domain}-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}`;
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/.test(workflowId)) throw new CliError('invalid --workflow-id', Exit.badInput);

  const client = await connectClient(config);
  try {
    // A host named on the command line pins the run there; otherwise the fleet finds the VM.
    const pinned = values.host !== undefined;
    const taskQueue = pinned ? hostTaskQueue(config.host) : FLEET_TASK_QUEUE;
    const disks = request.disks ? `${request.disks.length} disk(s)` : 'all RBD disks';
    const dest = input.input.target.clone ? input.input.target.pool : 'snapshot only';
    const handle = await client.workflow.start('consistentSnapshot', {
      taskQueue,
      workflowId,
      args: [request],
      staticSummary: `snapshot ${request.domain}: ${disks} → ${dest}`,
      staticDetails: `quiesce=${input.input.quiesce}, freeze deadline ${input.input.freezeDeadlineMs} ms, ${pinned ? `host ${config.host}` : 'wherever it runs'}`,
      memo: { input: request },
      typedSearchAttributes: [
        { key: SA.domain, value: request.domain },
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
      const result = (await handle.result()) as SnapshotResult;
      await follow.stop();
      emit(!!values.json, result, () => humanResult(result));
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
    await closeConnection(client.connection);
  }
}

/**
 * Polls the run's progress query every 500 ms (restore uses it too). stop() also cancels the
 * query in flight: the connection closes soon after, and closing waits for every call
 * (temporal-client.ts).
 */
export function followProgress(
  client: Client,
  handle: { query: (q: typeof progressQuery) => Promise<ProgressView> },
  quiet: boolean,
) {
  // A run started by name hands the work to a run on the VM's host: show that run's progress.
  const read = async (): Promise<{ p: ProgressView; on?: string }> => {
    const p = await handle.query(progressQuery);
    if (!p.delegatedTo || p.phase === 'done' || p.phase === 'failed') return { p };
    const child = await client.workflow.getHandle(p.delegatedTo.workflowId).query(progressQuery);
    return { p: child, on: p.delegatedTo.host };
  };
  let last = '';
  let current: AbortController | undefined;
  const timer = setInterval(() => {
    if (current) return; // one query at a time: a slow answer is not queued behind
    const abort = (current = new AbortController());
    void client.connection
      .withAbortSignal(abort.signal, read)
      .finally(() => {
        if (current === abort) current = undefined;
      })
      .then(
        ({ p, on }) => {
          const bars = Object.entries(p.disks).map(([t, d]) => `${t} ${progressBar(d.percent)}`).join('  ');
          const line = `phase: ${p.phase}${on ? ` (on ${on})` : ''}${bars ? '  ' + bars : ''}`;
          if (!quiet && line !== last) process.stderr.write(`${line}\n`);
          last = line;
        },
        () => undefined,
      );
  }, 500);
  return {
    stop: async (): Promise<void> => {
      clearInterval(timer);
      current?.abort();
    },
  };
}

export function humanResult(r: SnapshotResult): string {
  const lines = [
    `${r.reusedExisting ? 'already done' : 'done'}: ${r.domain.name} on ${r.host} quiesced=${r.quiesced} (${r.quiesceReason})`,
    `  frozen filesystems: ${r.frozenFilesystems}, freeze window: ${r.freezeWindowMs === null ? 'n/a' : `${r.freezeWindowMs} ms`}`,
  ];
  for (const m of r.relocations ?? []) lines.push(`  moved away from ${m.from} before the freeze: ${m.reason}`);
  for (const d of r.disks) lines.push(`  ${d.target}: ${d.location}`);
  for (const s of r.skippedDisks) lines.push(`  ${s.target}: skipped (${s.reason})`);
  return lines.join('\n');
}
