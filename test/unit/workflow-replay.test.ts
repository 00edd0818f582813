import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Worker, bundleWorkflowCode } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { HISTORY_DIR } from '../helpers/histories';
import { workflowsPath } from '../../src/worker/workflows-path';

/*
 * Histories recorded from real lab runs (test/fixtures/histories, refreshed by the integration
 * tests) replayed against today's workflow code: a non-deterministic change fails here.
 */
describe('workflow determinism', () => {
  const files = readdirSync(HISTORY_DIR).filter((f) => f.endsWith('.json'));

  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it('replays every recorded history', async () => {
    const { code } = await bundleWorkflowCode({ workflowsPath: workflowsPath(), logger: quiet });
    const histories = files.map((f) => ({
      workflowId: f.replace(/\.json$/, ''),
      history: historyFromJSON(JSON.parse(readFileSync(path.join(HISTORY_DIR, f), 'utf8'))),
    }));
    const results = Worker.runReplayHistories({ workflowBundle: { code }, replayName: 'vmsnap' }, histories);
    for await (const r of results) {
      expect(r.error, `${r.workflowId}: ${String(r.error)}`).toBeUndefined();
    }
  }, 120_000);
});

const noop = () => undefined;
const quiet = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop };
