import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DOMAIN_NAME, RBD_NAME, parseSnapshotInput } from '../../src/model/input';

const hostile = fc.oneof(
  fc.constantFrom(
    '../../etc/passwd',
    'vms/evil',
    'img@snap',
    'a b',
    'x;rm -rf /',
    '$(reboot)',
    '`id`',
    'a\0b',
    'a\nb',
    '',
    '-rf',
    '😀',
    'ａｂｃ',
    'x'.repeat(10_000),
  ),
  fc.string({ unit: 'binary', maxLength: 300 }),
);

describe('snapshot input schema', () => {
  it('accepts a minimal request and fills safe defaults', () => {
    const r = parseSnapshotInput({ domain: 'vm-42' });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.input).toMatchObject({ quiesce: 'prefer', freezeDeadlineMs: 10_000, target: { pool: 'images', clone: true } });
    expect(r.input.snapshotTimeoutMs).toBeLessThan(r.input.freezeDeadlineMs);
  });

  it('accepts a UUID as the domain', () => {
    expect(parseSnapshotInput({ domain: '0b0f8a6e-1d2c-4b7a-9f00-123456789abc' }).ok).toBe(true);
  });

  it('rejects hostile domain names with a message naming the field', () => {
    fc.assert(
      fc.property(hostile, (domain) => {
        fc.pre(!DOMAIN_NAME.test(domain));
        const r = parseSnapshotInput({ domain });
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.message).toMatch(/^domain: /);
      }),
      { numRuns: 500 },
    );
  });

  it('rejects hostile pool and image names', () => {
    fc.assert(
      fc.property(hostile, (name) => {
        fc.pre(!RBD_NAME.test(name));
        expect(parseSnapshotInput({ domain: 'vm', target: { pool: name } }).ok).toBe(false);
        expect(parseSnapshotInput({ domain: 'vm', target: { images: { vdb: name } } }).ok).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it('rejects negative, zero, fractional, huge and non-numeric timeouts', () => {
    const bad = fc.oneof(
      fc.integer({ max: 0 }),
      fc.double({ noInteger: true }),
      fc.integer({ min: 100_000_000 }),
      fc.constantFrom(Number.NaN, Infinity, -Infinity, '100', null, true),
    );
    fc.assert(
      fc.property(bad, fc.constantFrom('freezeDeadlineMs', 'snapshotTimeoutMs', 'flattenTimeoutMs', 'agentTimeoutSec'), (v, k) => {
        expect(parseSnapshotInput({ domain: 'vm', [k]: v }).ok).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it('rejects unknown fields at every level', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 20 }), (k) => {
        fc.pre(!['domain', 'host', 'disks', 'skipNonRbdDisks', 'quiesce', 'target', 'freezeDeadlineMs', 'agentTimeoutSec', 'snapshotTimeoutMs', 'flattenTimeoutMs', 'labels', 'verify', 'lateSnapshotWatchMs', 'retention'].includes(k));
        fc.pre(!['__proto__', 'constructor'].includes(k));
        expect(parseSnapshotInput({ domain: 'vm', [k]: 1 }).ok).toBe(false);
      }),
    );
    expect(parseSnapshotInput({ domain: 'vm', target: { pool: 'images', secret: 'x' } }).ok).toBe(false);
  });

  it('never throws, whatever it is given', () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        const r = parseSnapshotInput(v);
        expect(typeof r.ok).toBe('boolean');
      }),
      { numRuns: 1000 },
    );
  });

  it('DR mode: target.mirror is off unless asked; asked, it waits 10 minutes by default, at most a day', () => {
    const off = parseSnapshotInput({ domain: 'vm-42' });
    expect(off.ok && off.input.target.mirror).toBe(undefined);
    const on = parseSnapshotInput({ domain: 'vm-42', target: { mirror: {} } });
    expect(on.ok && on.input.target.mirror).toEqual({ waitMs: 600_000 });
    for (const [mirror, says] of [
      [{ waitMs: 0 }, 'target.mirror.waitMs: target.mirror.waitMs must be > 0'],
      [{ waitMs: 24 * 3600_000 + 1 }, 'target.mirror.waitMs: target.mirror.waitMs must be <= 86400000 ms'],
      [{ site: 'b' }, 'target.mirror'],
      [true, 'target.mirror'],
    ] as const) {
      const r = parseSnapshotInput({ domain: 'vm-42', target: { mirror } });
      expect(r.ok, JSON.stringify(mirror)).toBe(false);
      if (!r.ok) expect(r.message).toContain(says);
    }
  });

  it('a snapshot bound must fit inside the freeze deadline', () => {
    const r = parseSnapshotInput({ domain: 'vm', freezeDeadlineMs: 5000, snapshotTimeoutMs: 8000 });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(/snapshotTimeoutMs must be below freezeDeadlineMs/);
  });
});
