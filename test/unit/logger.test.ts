import { spawnSync } from 'node:child_process';
import { closeSync, fstatSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { jsonLogger, sdkLogFunction, sdkLogLevel, stderrIsJournal, withFields } from '../../src/worker/logger';
import type { LogLevel } from '../../src/worker/logger';

function capture() {
  const lines: string[] = [];
  const out = { write: (s: string) => (lines.push(s), true) } as unknown as NodeJS.WritableStream;
  return { lines, out, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('JSON logs', () => {
  it('one JSON object per line, with base context; Errors and bigints survive', () => {
    const c = capture();
    jsonLogger({ host: 'h1' }, c.out).warn('thaw retried', { err: new Error('agent gone'), nanos: 12n });
    expect(c.lines[0]!.endsWith('\n')).toBe(true);
    expect(c.parsed()[0]).toMatchObject({ level: 'warn', msg: 'thaw retried', host: 'h1', nanos: '12', err: { name: 'Error', message: 'agent gone' } });
  });

  it("the SDK's own log entries become the same JSON lines, marked sdk", () => {
    const c = capture();
    const fn = sdkLogFunction(jsonLogger({ host: 'h1' }, c.out, { level: 'debug' }));
    fn({ level: 'WARN', message: 'No workflows registered', meta: { taskQueue: 'q-bulk', timestampNanos: 1n } });
    fn({ level: 'ERROR', message: 'Worker failed', meta: { error: new TypeError('x') } });
    fn({ level: 'TRACE', message: 't' });
    expect(c.parsed().map((l) => [l.level, l.sdk, l.host])).toEqual([
      ['warn', true, 'h1'],
      ['error', true, 'h1'],
      ['debug', true, 'h1'],
    ]);
    expect(c.parsed()[0]).toMatchObject({ msg: 'No workflows registered', taskQueue: 'q-bulk' });
  });
});

describe('levels (VMSNAP_LOG_LEVEL)', () => {
  const all = (log: ReturnType<typeof jsonLogger>) => {
    log.error('e');
    log.warn('w');
    log.info('i');
    log.debug('d');
  };

  it('a logger writes its level and the more severe ones; info unless told', () => {
    const levels = (level?: LogLevel) => {
      const c = capture();
      all(jsonLogger({}, c.out, { level }));
      return c.parsed().map((l) => l.level);
    };
    expect(levels()).toEqual(['error', 'warn', 'info']);
    expect(levels('error')).toEqual(['error']);
    expect(levels('warn')).toEqual(['error', 'warn']);
    expect(levels('debug')).toEqual(['error', 'warn', 'info', 'debug']);
  });

  it("the Temporal SDK's lines pass the same filter: its logger is given our level", () => {
    const c = capture();
    const sdk = new DefaultLogger(sdkLogLevel('warn'), sdkLogFunction(jsonLogger({}, c.out, { level: 'warn' })));
    sdk.error('Worker failed');
    sdk.warn('Workflow failed', { workflowId: 'w', runId: 'r' });
    sdk.info('Worker state changed');
    sdk.debug('Activity started');
    sdk.trace('poll');
    expect(c.parsed().map((l) => [l.level, l.msg])).toEqual([
      ['error', 'Worker failed'],
      ['warn', 'Workflow failed'],
    ]);
  });

  it('withFields puts its fields on every line; a line’s own attributes win', () => {
    const c = capture();
    const run = withFields(jsonLogger({ host: 'h1' }, c.out), { workflowId: 'snap-1', runId: 'r-1', domain: 'vm-1' });
    run.warn('thaw retried');
    run.info('guest thawed', { domain: 'vm-2' });
    expect(c.parsed()).toMatchObject([
      { host: 'h1', workflowId: 'snap-1', runId: 'r-1', domain: 'vm-1' },
      { workflowId: 'snap-1', runId: 'r-1', domain: 'vm-2' },
    ]);
  });
});

describe('journald priority prefix', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-journal-'));

  it('`<N>` (syslog priority) before each line exactly when stderr is the stream JOURNAL_STREAM names', () => {
    // A child whose stderr is a file stands in for journald's stream: JOURNAL_STREAM names that
    // file by dev:inode, as systemd names the socket it connected. In the same process, the variable
    // then names another file (inherited by a process whose stderr went elsewhere), then is unset.
    const err = path.join(dir, 'stderr');
    const other = path.join(dir, 'other');
    writeFileSync(other, '');
    const fd = openSync(err, 'w');
    const st = fstatSync(fd, { bigint: true });
    const elsewhere = fstatSync(openSync(other, 'r'), { bigint: true });
    const script = `
      const { jsonLogger } = require(${JSON.stringify(path.resolve(__dirname, '../../src/worker/logger.ts'))});
      const all = (tag, level) => { const l = jsonLogger({ tag }, process.stderr, { level }); l.error('e'); l.warn('w'); l.info('i'); l.debug('d'); };
      all('journal', 'debug');
      all('journal-at-warn', 'warn');
      process.env.JOURNAL_STREAM = ${JSON.stringify(`${elsewhere.dev}:${elsewhere.ino}`)};
      all('other-file', 'debug');
      delete process.env.JOURNAL_STREAM;
      all('unset', 'debug');`;
    const r = spawnSync(process.execPath, ['--require', require.resolve('tsx/cjs'), '-e', script], {
      env: { ...process.env, JOURNAL_STREAM: `${st.dev}:${st.ino}` },
      stdio: ['ignore', 'ignore', fd],
      timeout: 30_000,
    });
    closeSync(fd);
    expect(r.status).toBe(0);
    const lines = readFileSync(err, 'utf8').trimEnd().split('\n');
    const seen = lines.map((l) => {
      const m = /^(<\d>)?(\{.*\})$/.exec(l);
      if (!m) throw new Error(`not a log line: ${l}`);
      const j = JSON.parse(m[2]!) as { tag: string; level: string };
      return `${j.tag} ${m[1] ?? ''}${j.level}`;
    });
    expect(seen).toEqual([
      'journal <3>error',
      'journal <4>warn',
      'journal <6>info',
      'journal <7>debug',
      'journal-at-warn <3>error',
      'journal-at-warn <4>warn',
      'other-file error',
      'other-file warn',
      'other-file info',
      'other-file debug',
      'unset error',
      'unset warn',
      'unset info',
      'unset debug',
    ]);
  });

  it('stderrIsJournal compares JOURNAL_STREAM with the fd’s own device and inode', () => {
    const file = path.join(dir, 'fd');
    const fd = openSync(file, 'w');
    try {
      const st = fstatSync(fd, { bigint: true });
      expect(stderrIsJournal({ JOURNAL_STREAM: `${st.dev}:${st.ino}` }, fd)).toBe(true);
      expect(stderrIsJournal({ JOURNAL_STREAM: `${st.dev}:${st.ino + 1n}` }, fd)).toBe(false);
      expect(stderrIsJournal({ JOURNAL_STREAM: `${st.dev + 1n}:${st.ino}` }, fd)).toBe(false);
      expect(stderrIsJournal({ JOURNAL_STREAM: 'garbage' }, fd)).toBe(false);
      expect(stderrIsJournal({}, fd)).toBe(false);
    } finally {
      closeSync(fd);
    }
  });
});
