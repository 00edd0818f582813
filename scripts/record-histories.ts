/**
 * Re-records the workflow histories the replay test uses (test/fixtures/histories), from real
 * runs on the lab. Run after a deliberate, compatible workflow change:
 *   npx tsx scripts/record-histories.ts [guest...]
 * This is the only writer of those files (it sets VMSNAP_RECORD_HISTORIES=1 for recordHistory);
 * `npm test` never rewrites them.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { startHarness, uniqueId } from '../test/helpers/harness';
import { recordHistory, HISTORY_DIR } from '../test/helpers/histories';
import { CephView } from '../test/helpers/ceph-inspect';
import type { SnapshotResult } from '../src/model/types';

const CASES: Record<string, (v: Record<string, string>) => { name: string; input: Record<string, unknown> }> = {
  noagent: (v) => ({ name: 'prefer-noagent', input: { domain: v.VMSNAP_GUEST_NOAGENT } }),
  g1: (v) => ({ name: 'happy-1disk', input: { domain: v.VMSNAP_GUEST_1DISK, quiesce: 'require', verify: true } }),
  g3: (v) => ({ name: 'happy-3disk', input: { domain: v.VMSNAP_GUEST_3DISK, quiesce: 'require', verify: true } }),
};

async function main(): Promise<void> {
  process.env.VMSNAP_RECORD_HISTORIES = '1';
  const which = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(CASES);
  const h = await startHarness();
  const ceph = new CephView(h.vars);
  try {
    for (const key of which) {
      const { name, input } = CASES[key](h.vars);
      const id = uniqueId(name);
      const result: SnapshotResult = await h.client.workflow.execute('consistentSnapshot', { taskQueue: h.hw.taskQueue, workflowId: id, args: [input] });
      rmSync(path.join(HISTORY_DIR, `${name}.json`), { force: true });
      await recordHistory(h.client, id, name);
      await ceph.removeResultImages(result);
      console.log(`recorded ${name} (${id}), quiesced=${result.quiesced}`);
    }
  } finally {
    await h.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
