import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';

/**
 * One directory per released workflow version (`<set>/<case>.json`). Old sets stay: a workflow
 * started under an older release may still be in flight when a new worker picks it up, so today's
 * code must replay every set, not only the newest.
 */
export const HISTORY_DIR = path.resolve(__dirname, '../fixtures/histories');

export function historyFiles(): { id: string; file: string }[] {
  const out: { id: string; file: string }[] = [];
  for (const set of readdirSync(HISTORY_DIR, { withFileTypes: true })) {
    if (!set.isDirectory()) continue;
    for (const f of readdirSync(path.join(HISTORY_DIR, set.name))) {
      if (f.endsWith('.json')) out.push({ id: `${set.name}/${f.replace(/\.json$/, '')}`, file: path.join(HISTORY_DIR, set.name, f) });
    }
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

/** Saves a finished run's history into a set; only scripts/record-histories.ts calls this. */
export async function recordHistory(client: Client, workflowId: string, set: string, name: string): Promise<void> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  mkdirSync(path.join(HISTORY_DIR, set), { recursive: true });
  const { historyToJSON } = await import('@temporalio/common/lib/proto-utils');
  writeFileSync(path.join(HISTORY_DIR, set, `${name}.json`), historyToJSON(history));
}
