/**
 * Records a set of workflow histories for the replay test (test/fixtures/histories/<set>), from
 * real runs on the lab, when a workflow change is released:
 *   npx tsx scripts/record-histories.ts --set <name> [case...]
 * A set is never rewritten (a new release gets a new set; the sets inside the support window keep
 * proving that runs started under them still replay, and a set leaves only as docs/versioning.md
 * says). This is the only writer of those files; `npm test` never is.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { startHarness, uniqueId } from '../test/helpers/harness';
import type { Harness } from '../test/helpers/harness';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import { hostEntryId } from '../src/model/fleet-index';
import { readHost } from '../src/worker/fleet-index';
import { recordHistory, HISTORY_DIR } from '../test/helpers/histories';
import { CephView } from '../test/helpers/ceph-inspect';
import type { SnapshotResult } from '../src/model/types';

interface Case {
  name: string;
  input: Record<string, unknown>;
  /** Started by VM name on the fleet queue: its child's history on the host and the registry's are saved. */
  fleet?: boolean;
}

const CASES: Record<string, (v: Record<string, string>) => Case> = {
  noagent: (v) => ({ name: 'prefer-noagent', input: { domain: v.VMSNAP_GUEST_NOAGENT } }),
  g1: (v) => ({ name: 'happy-1disk', input: { domain: v.VMSNAP_GUEST_1DISK, quiesce: 'require', verify: true } }),
  g3: (v) => ({ name: 'happy-3disk', input: { domain: v.VMSNAP_GUEST_3DISK, quiesce: 'require', verify: true } }),
  fleet: (v) => ({ name: 'fleet', input: { domain: v.VMSNAP_GUEST_1DISK, quiesce: 'require' }, fleet: true }),
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
  const h = await startHarness({ config: { fleetBeatMs: 1000 } });
  const ceph = new CephView(h.vars);
  try {
    for (const key of which) {
      const { name, input, fleet } = CASES[key](h.vars);
      const id = uniqueId(name);
      if (fleet) await untilInRegistry(h, String(input.domain));
      const taskQueue = fleet ? FLEET_TASK_QUEUE : h.hw.taskQueue;
      const result: SnapshotResult = await h.client.workflow.execute('consistentSnapshot', { taskQueue, workflowId: id, args: [input] });
      if (fleet) {
        // The router's own history replays against the fleet queue's bundle (workflows/fleet.ts),
        // its child's against a host's.
        await recordHistory(h.client, id, set, `${name}-router`, 'fleet');
        await recordHistory(h.client, `${id}.on.${result.host}`, set, `${name}-child`);
        // Running (it continues as new): an open history replays as far as it goes.
        await recordHistory(h.client, hostEntryId(h.config.host), set, `${name}-host-entry`);
      } else {
        await recordHistory(h.client, id, set, name);
      }
      await ceph.removeResultImages(result);
      console.log(`recorded ${name} (${id}), quiesced=${result.quiesced}`);
    }
  } finally {
    await h.stop();
  }
}

async function untilInRegistry(h: Harness, domain: string): Promise<void> {
  const end = Date.now() + 30_000;
  for (;;) {
    const host = await readHost(h.client, h.config.host).catch(() => undefined);
    if (host?.domains.some((d) => d.name === domain)) return;
    if (Date.now() > end) throw new Error(`the fleet index does not list ${domain} on ${h.config.host}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
