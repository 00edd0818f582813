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

  it('replays every recorded history', async () => {
    const code = inject('workflowBundle');
    const histories = files.map((f) => ({ workflowId: f.workflowId, history: historyFromJSON(JSON.parse(readFileSync(f.file, 'utf8'))) }));
    const fileOf = new Map(files.map((f) => [f.workflowId, f.id]));
    const results = Worker.runReplayHistories({ workflowBundle: { code }, replayName: 'vmsnap' }, histories);
    for await (const r of results) {
      expect(r.error, `${fileOf.get(r.workflowId)} (${r.workflowId}): ${String(r.error)}`).toBeUndefined();
    }
  }, 120_000);
});
