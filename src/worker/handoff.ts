import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import type { JournalEntry } from '../host/freeze-journal';
import { FLEET_TASK_QUEUE } from '../model/fleet';
import type { HandOff } from './reconcile';

/**
 * The host layers' way to the fleet's one hand-off (workflows/thaw-wherever.ts) for a journaled
 * freeze whose domain is gone from this host. One workflow id per freeze (its guard id), so a
 * sweep that comes round again joins the hand-off already under way instead of starting another.
 */
export function handOffVia(client: Client, host: string): HandOff {
  return async (entry: JournalEntry) => {
    const workflowId = `vmsnap-handoff-${entry.guardId}`;
    const args = [{ domainUuid: entry.domainUuid, domainName: entry.domainName, agentTimeoutSec: entry.agentTimeoutSec, fromHost: host, owner: entry.owner, searchMs: 10_000 }];
    let handle;
    try {
      handle = await client.workflow.start('thawWherever', { taskQueue: FLEET_TASK_QUEUE, workflowId, args, workflowExecutionTimeout: '5m' });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      handle = client.workflow.getHandle(workflowId);
    }
    return (await handle.result()) as Awaited<ReturnType<HandOff>>;
  };
}
