import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config';
import { exitOutcome, freezeNeedsMs, pollDelayMs, PRE_FLUSH_CALL_TIMEOUT_MS, preFlushBudgetMs } from '../../src/model/pre-flush';
import { snapshotResult } from '../../src/model/snapshot-result';
import type { Capture } from '../../src/model/snapshot-result';
import type { InspectResult, SnapshotPlan } from '../../src/model/types';
import { writerScript, parseDirty } from '../../support/lab/dirty-writer';

describe('pre-flush budget: never at the freeze\'s expense', () => {
  it('is off at 0 and the configured wait when the activity has no known limit', () => {
    expect(preFlushBudgetMs({ timeoutMs: 0, freezeNeedsMs: 10_000 })).toBe(0);
    expect(preFlushBudgetMs({ timeoutMs: 1000, freezeNeedsMs: 10_000 })).toBe(1000);
  });

  it('leaves the freeze what it needs after it, plus one agent call\'s tail', () => {
    const needs = freezeNeedsMs(5); // guard + agent timeout + freeze call limit
    expect(needs).toBe(10_000);
    // The default profile: agentTimeoutSec 5 s + snapshotTimeoutMs 8 s + 5 s.
    expect(preFlushBudgetMs({ timeoutMs: 1000, activityLeftMs: 18_000, freezeNeedsMs: needs })).toBe(1000);
    expect(preFlushBudgetMs({ timeoutMs: 5000, activityLeftMs: 15_000, freezeNeedsMs: needs })).toBe(15_000 - needs - PRE_FLUSH_CALL_TIMEOUT_MS);
    expect(preFlushBudgetMs({ timeoutMs: 1000, activityLeftMs: needs + PRE_FLUSH_CALL_TIMEOUT_MS + 300, freezeNeedsMs: needs })).toBe(300);
    expect(preFlushBudgetMs({ timeoutMs: 1000, activityLeftMs: needs, freezeNeedsMs: needs })).toBe(0);
    expect(preFlushBudgetMs({ timeoutMs: 1000, activityLeftMs: -5, freezeNeedsMs: needs })).toBe(0);
  });

  it('polls soon after the command starts, then every 100 ms, never past the time left', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 50].map((n) => pollDelayMs(n, 10_000))).toEqual([5, 10, 20, 40, 80, 100, 100, 100]);
    expect(pollDelayMs(5, 30)).toBe(30);
    expect(pollDelayMs(5, -10)).toBe(0);
  });
});

describe('pre-flush outcome from guest-exec-status', () => {
  it('exit 0 is done; anything else failed, with the exit code or signal and what the command said', () => {
    expect(exitOutcome({ exitCode: 0 })).toEqual({ outcome: 'done', exitCode: 0 });
    expect(exitOutcome({ exitCode: 1, stderr: 'sync: /mnt/x: No such file or directory\n' })).toEqual({
      outcome: 'failed',
      exitCode: 1,
      error: 'exit 1: sync: /mnt/x: No such file or directory',
    });
    expect(exitOutcome({ signal: 9 })).toEqual({ outcome: 'failed', error: 'killed by signal 9' });
    expect(exitOutcome({ exitCode: 2, stderr: 'x'.repeat(1000) }).error!.length).toBeLessThanOrEqual(300);
  });
});

describe('pre-flush configuration', () => {
  it('is on by default: sync, waited for 1 s', () => {
    const c = loadConfig({}, {}, undefined);
    expect(c.preFlushTimeoutMs).toBe(1000);
    expect(c.preFlushCommand).toEqual(['sync']);
  });

  it('is set from the environment (0 turns it off; the command split on whitespace) or the file', () => {
    expect(loadConfig({}, { VMSNAP_PRE_FLUSH_TIMEOUT_MS: '0' }, undefined).preFlushTimeoutMs).toBe(0);
    expect(loadConfig({}, { VMSNAP_PRE_FLUSH_COMMAND: ' sync  -f /srv ' }, undefined).preFlushCommand).toEqual(['sync', '-f', '/srv']);
    expect(loadConfig({ preFlushCommand: ['/usr/local/bin/flush-db'], preFlushTimeoutMs: 2500 }, {}, undefined)).toMatchObject({ preFlushCommand: ['/usr/local/bin/flush-db'], preFlushTimeoutMs: 2500 });
  });

  it('refuses a wait the freeze could not afford and an empty command, naming the key', () => {
    expect(() => loadConfig({}, { VMSNAP_PRE_FLUSH_TIMEOUT_MS: '60000' }, undefined)).toThrow(ConfigError);
    expect(() => loadConfig({}, { VMSNAP_PRE_FLUSH_TIMEOUT_MS: '-1' }, undefined)).toThrow(/preFlushTimeoutMs/);
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'cfg-')), 'vmsnap.json');
    writeFileSync(file, JSON.stringify({ preFlushCommand: [] }));
    expect(() => loadConfig({}, {}, file)).toThrow(/preFlushCommand/);
  });
});

describe('the result says what the pre-flush did, outside the window', () => {
  const plan = { domain: { name: 'vm', uuid: 'u' }, disks: [], skipped: [] } as unknown as SnapshotPlan;
  const found = { host: 'h', fsid: 'f' } as unknown as InspectResult;
  const capture = (preFlush?: object): Capture => ({
    quiesced: true,
    quiesceReason: 'held',
    frozenFilesystems: 1,
    freeze: { frozenFilesystems: 1, startedAt: 1000, returnedAt: 1010, ...(preFlush ? { preFlush } : {}) } as Capture['freeze'],
    snapshot: { startedAt: 1011, returnedAt: 1020, perDiskMs: {} },
    thaw: { thawedFilesystems: 1, startedAt: 1021, returnedAt: 1030 } as Capture['thaw'],
  });

  it('outcome and time when the worker ran one; the window starts at the freeze call all the same', () => {
    const r = snapshotResult({ workflowId: 'w', plan, found, steps: {} }, capture({ outcome: 'timeout', startedAt: 0, returnedAt: 999.94, ms: 999.94, error: 'sync still running after 1000 ms' }), []);
    expect(r.preFlush).toEqual({ outcome: 'timeout', ms: 999.9, error: 'sync still running after 1000 ms' });
    expect(r.freezeWindowMs).toBe(30);
  });

  it('nothing when the worker ran none', () => {
    expect(snapshotResult({ workflowId: 'w', plan, found, steps: {} }, capture(), [])).not.toHaveProperty('preFlush');
  });
});

describe('the write-load lane\'s writers (support/lab/dirty-writer.ts)', () => {
  it('write N MiB per disk through a wrapping file, paced when asked, and report the guest\'s dirty pages', () => {
    expect(writerScript(64, 0)).toContain('n=64; w=32; c=4');
    expect(writerScript(16, 50)).toContain('usleep 20000');
    expect(() => writerScript(-1, 0)).toThrow();
    expect(parseDirty('Dirty:             16384 kB\nWriteback:          2048 kB\n')).toEqual({ dirtyKiB: 16384, writebackKiB: 2048 });
  });
});
