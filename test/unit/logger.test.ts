import { describe, expect, it } from 'vitest';
import { jsonLogger, sdkLogFunction } from '../../src/worker/logger';

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
    const fn = sdkLogFunction(jsonLogger({ host: 'h1' }, c.out));
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
