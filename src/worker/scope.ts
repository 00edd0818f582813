import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import type { RunScope } from '../model/identity';

/**
 * This worker's scope: its Temporal namespace, and the configured fleet id or else the
 * namespace's id — a UUID per namespace registration, so two Temporal clusters that both call
 * their namespace `default` still differ (DescribeNamespace).
 */
export async function resolveScope(config: Config, client: Client): Promise<RunScope> {
  const namespace = config.temporal.namespace;
  if (config.fleetId) return { namespace, cluster: config.fleetId };
  const d = await client.workflowService.describeNamespace({ namespace });
  const id = d.namespaceInfo?.id;
  if (!id) throw new Error(`Temporal namespace ${namespace} has no id (DescribeNamespace)`);
  return { namespace, cluster: `temporal-ns:${id}` };
}
