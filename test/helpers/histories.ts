import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';

export const HISTORY_DIR = path.resolve(__dirname, '../fixtures/histories');

/**
 * Saves a finished run's history for the replay test — only when asked to
 * (`VMSNAP_RECORD_HISTORIES=1`, see scripts/record-histories.ts). The committed histories are of
 * released workflow code: a test run that re-recorded them would make the replay test compare
 * the code with itself and miss a change that breaks in-flight workflows.
 */
export async function recordHistory(client: Client, workflowId: string, name: string): Promise<void> {
  if (process.env.VMSNAP_RECORD_HISTORIES !== '1') return;
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  mkdirSync(HISTORY_DIR, { recursive: true });
  const { historyToJSON } = await import('@temporalio/common/lib/proto-utils');
  writeFileSync(path.join(HISTORY_DIR, `${name}.json`), historyToJSON(history));
}
