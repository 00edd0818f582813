import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';

/**
 * One directory per released workflow version (`<set>/<case>.json`). The sets of the support
 * window stay (docs/versioning.md: the newest two). A workflow started under an older release
 * may still be in flight when a new worker picks it up, so today's code must replay every kept
 * set, not only the newest. A set that leaves the window is deleted in the change that retires
 * the patches it held back.
 */
export const HISTORY_DIR = path.resolve(__dirname, '../fixtures/histories');

export interface HistoryFile {
  id: string;
  file: string;
  workflowId: string;
  /**
   * Which worker ran it: a host queue's (workflows/index.ts) or the fleet queue's
   * (workflows/fleet.ts, where consistentSnapshot is the router), from `<case>.bundle` beside it.
   */
  bundle: 'host' | 'fleet';
}

/**
 * `workflowId`: the recorded run's own id (`<case>.workflow-id` beside the history), which the
 * replay must use — workflow code may derive from it (a fleet slot's first pick does). Sets
 * recorded before it was saved replay under their file id.
 */
export function historyFiles(): HistoryFile[] {
  const out: HistoryFile[] = [];
  for (const set of readdirSync(HISTORY_DIR, { withFileTypes: true })) {
    if (!set.isDirectory()) continue;
    for (const f of readdirSync(path.join(HISTORY_DIR, set.name))) {
      if (!f.endsWith('.json')) continue;
      const id = `${set.name}/${f.replace(/\.json$/, '')}`;
      const idFile = path.join(HISTORY_DIR, set.name, f.replace(/\.json$/, '.workflow-id'));
      const bundleFile = path.join(HISTORY_DIR, set.name, f.replace(/\.json$/, '.bundle'));
      const bundle = existsSync(bundleFile) && readFileSync(bundleFile, 'utf8').trim() === 'fleet' ? 'fleet' : 'host';
      out.push({ id, file: path.join(HISTORY_DIR, set.name, f), workflowId: existsSync(idFile) ? readFileSync(idFile, 'utf8').trim() : id, bundle });
    }
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

/** Saves a finished run's history into a set; only scripts/record-histories.ts calls this. */
export async function recordHistory(client: Client, workflowId: string, set: string, name: string, bundle: HistoryFile['bundle'] = 'host'): Promise<void> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  mkdirSync(path.join(HISTORY_DIR, set), { recursive: true });
  const { historyToJSON } = await import('@temporalio/common/lib/proto-utils');
  writeFileSync(path.join(HISTORY_DIR, set, `${name}.json`), historyToJSON(history));
  writeFileSync(path.join(HISTORY_DIR, set, `${name}.workflow-id`), `${workflowId}\n`);
  if (bundle === 'fleet') writeFileSync(path.join(HISTORY_DIR, set, `${name}.bundle`), 'fleet\n');
}
