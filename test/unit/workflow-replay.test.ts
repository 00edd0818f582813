import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { Worker } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { historyFiles } from '../helpers/histories';

/*
 * Histories recorded from real lab runs of released workflow code (test/fixtures/histories/<set>,
 * written only by scripts/record-histories.ts) replayed against today's code: a change that would
 * break a run in flight across an upgrade fails here.
 */
describe('workflow determinism', () => {
  const files = historyFiles();

  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  // Each against the bundle of the queue it ran on: a host's, or the fleet queue's (the routers).
  it.each(['host', 'fleet'] as const)('replays every recorded history of a %s queue', async (bundle) => {
    const code = inject(bundle === 'fleet' ? 'fleetWorkflowBundle' : 'workflowBundle');
    const mine = files.filter((f) => f.bundle === bundle);
    const histories = mine.map((f) => ({ workflowId: f.workflowId, history: historyFromJSON(JSON.parse(readFileSync(f.file, 'utf8'))) }));
    const fileOf = new Map(mine.map((f) => [f.workflowId, f.id]));
    const results = Worker.runReplayHistories({ workflowBundle: { code }, replayName: 'vmsnap' }, histories);
    let replayed = 0;
    for await (const r of results) {
      replayed++;
      expect(r.error, `${fileOf.get(r.workflowId)} (${r.workflowId}): ${String(r.error)}`).toBeUndefined();
    }
    expect(replayed).toBe(mine.length);
  }, 120_000);

  it('has a router history among them (the default path of `vmsnap snapshot`)', () => {
    expect(files.filter((f) => f.bundle === 'fleet').map((f) => f.id)).toContainEqual(expect.stringMatching(/router$/));
  });
});
