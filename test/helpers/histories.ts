import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';

export const HISTORY_DIR = path.resolve(__dirname, '../fixtures/histories');

/**
 * Saves a finished run's history for the replay test. Recorded from real lab runs; committed, so
 * a change that breaks determinism for in-flight workflows fails `npm test` without the lab.
 */
export async function recordHistory(client: Client, workflowId: string, name: string): Promise<void> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  mkdirSync(HISTORY_DIR, { recursive: true });
  const { historyToJSON } = await import('@temporalio/common/lib/proto-utils');
  writeFileSync(path.join(HISTORY_DIR, `${name}.json`), historyToJSON(history));
}
