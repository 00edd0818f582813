import type { Client } from '@temporalio/client';
import { FLEET_TASK_QUEUE } from '../../src/model/fleet';
import { limitWorkflowId } from '../../src/model/limits';
import type { LimitKind, LimitRequest, LimitState } from '../../src/model/limits';

/** A fleet limit's queue and grants (workflows/fleet-limit.ts), or empty when it is not running. */
export async function limitState(client: Client, id: string): Promise<LimitState> {
  try {
    return await client.workflow.getHandle(id).query<LimitState>('limitState');
  } catch (err) {
    if (/not found|completed|terminated/i.test(String((err as Error)?.message ?? err))) return { n: 0, queue: [], held: [] };
    throw err;
  }
}

/** A running workflow that can hold a turn: a lock workflow, which waits until released. */
export async function holderRun(client: Client, workflowId: string): Promise<{ workflowId: string; runId: string }> {
  const h = await client.workflow.start('domainLock', { taskQueue: FLEET_TASK_QUEUE, workflowId, args: [{ workflowId: 'nobody', runId: 'none' }] });
  return { workflowId: h.workflowId, runId: h.firstExecutionRunId };
}

/** Asks the limit for a turn as `holder`, as a run does (workflows/limits.ts), starting the limit if needed. */
export async function askTurn(client: Client, kind: LimitKind, scope: string, holder: { workflowId: string; runId: string }, n: number, leaseMs = 60_000): Promise<LimitRequest> {
  const req: LimitRequest = { ...holder, ticket: `${holder.runId}/${kind}`, leaseMs, n };
  await client.workflow.signalWithStart('fleetLimit', { workflowId: limitWorkflowId(kind, scope), taskQueue: FLEET_TASK_QUEUE, args: [{}], signal: 'limitRequest', signalArgs: [req] });
  return req;
}

/** Takes a turn of a limit for the test (to make runs wait); `release` ends it and its holder. */
export async function holdTurn(client: Client, kind: LimitKind, scope: string, n: number, tag: string): Promise<{ release(): Promise<void> }> {
  const holder = await holderRun(client, `test-turn-${tag}`);
  const req = await askTurn(client, kind, scope, holder, n);
  const id = limitWorkflowId(kind, scope);
  for (let i = 0; i < 100 && !(await limitState(client, id)).held.some((e) => e.ticket === req.ticket); i++) await new Promise((r) => setTimeout(r, 100));
  return {
    release: async () => {
      await client.workflow.getHandle(id).signal('limitRelease', { ticket: req.ticket }).catch(() => undefined);
      await client.workflow.getHandle(holder.workflowId).terminate('test turn released').catch(() => undefined);
    },
  };
}

/** The grants held for a workflow id in every running limit. */
export async function turnsHeldBy(client: Client, workflowId: string): Promise<string[]> {
  const out: string[] = [];
  for await (const w of client.workflow.list({ query: `WorkflowType = 'fleetLimit' AND ExecutionStatus = 'Running'` })) {
    const s = await limitState(client, w.workflowId);
    out.push(...s.held.filter((e) => e.workflowId === workflowId).map((e) => `${w.workflowId}: ${e.ticket}`));
  }
  return out;
}
