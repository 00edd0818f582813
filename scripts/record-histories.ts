/**
 * Records a set of workflow histories for the replay test (test/fixtures/histories/<set>), from
 * real runs on the lab, when a workflow change is released:
 *   npx tsx scripts/record-histories.ts --set <name> [case...]
 * A set is never rewritten (a new release gets a new set; older sets keep proving that runs
 * started under them still replay). This is the only writer of those files; `npm test` never is.
 */
import { existsSync } from 'node:fs';
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
  const args = process.argv.slice(2);
  const at = args.indexOf('--set');
  const set = at >= 0 ? args[at + 1] : undefined;
  if (!set || !/^[\w.-]+$/.test(set)) throw new Error('usage: record-histories.ts --set <name> [case...] (cases: ' + Object.keys(CASES).join(', ') + ')');
  const rest = args.filter((_a, i) => i !== at && i !== at + 1);
  const unknown = rest.filter((c) => !(c in CASES));
  if (unknown.length) throw new Error(`unknown case(s): ${unknown.join(', ')}`);
  if (existsSync(path.join(HISTORY_DIR, set))) throw new Error(`set ${set} exists: a released set is never rewritten; pick a new name`);
  const which = rest.length ? rest : Object.keys(CASES);
  const h = await startHarness();
  const ceph = new CephView(h.vars);
  try {
    for (const key of which) {
      const { name, input } = CASES[key](h.vars);
      const id = uniqueId(name);
      const result: SnapshotResult = await h.client.workflow.execute('consistentSnapshot', { taskQueue: h.hw.taskQueue, workflowId: id, args: [input] });
      await recordHistory(h.client, id, set, name);
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
