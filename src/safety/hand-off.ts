import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import type { JournalEntry } from './freeze-journal';
import { FLEET_TASK_QUEUE } from '../model/fleet';
import type { FreezeObligation } from '../model/freeze-obligation';
import type { HandOff } from './reconcile';

/** One hand-off per freeze, whoever starts it (the run, the sweeper, the router of a lost host). */
export function handOffWorkflowId(freezeId: string): string {
  return `vmsnap-handoff-${freezeId}`;
}

/**
 * The host layers' way to the fleet's one hand-off (workflows/hand-off.ts) for a journaled freeze
 * whose domain left this host. It only starts it: the hand-off never gives up, and this host's
 * part ends once it runs. A sweep that comes round again finds it started and joins it.
 */
export function handOffVia(client: Client, host: string, obligationOf?: (uuid: string) => Promise<Pick<FreezeObligation, 'disks'> | undefined>): HandOff {
  return async (entry: JournalEntry) => {
    const workflowId = handOffWorkflowId(entry.freezeId ?? entry.guardId);
    const disks = (await obligationOf?.(entry.domainUuid).catch(() => undefined))?.disks ?? [];
    const args = [
      {
        domainUuid: entry.domainUuid,
        domainName: entry.domainName,
        agentTimeoutSec: entry.agentTimeoutSec,
        fromHost: host,
        owner: entry.owner,
        ...(entry.freezeId ? { freezeId: entry.freezeId } : {}),
        disks,
      },
    ];
    try {
      await client.workflow.start('handOffFreeze', { taskQueue: FLEET_TASK_QUEUE, workflowId, args });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    return workflowId;
  };
}
