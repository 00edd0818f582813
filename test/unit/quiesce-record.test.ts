import { describe, expect, it } from 'vitest';
import { recordFromObject, recordFromMeta, reusedQuiesce } from '../../src/model/quiesce-record';
import { isPredecessor } from '../../activities/predecessor';
import { META } from '../../src/model/types';

const KEYS = { quiesced: META.quiesced, frozenFilesystems: META.frozenFilesystems, frozenAt: META.frozenAt, reason: META.quiesceReason };
const AT = '2026-12-01T05:00:00.123Z';
const q = (target: string, frozenFilesystems = 3, frozenAt = AT) => ({ target, record: { quiesced: true, frozenFilesystems, frozenAt } });

describe('reusedQuiesce: a reused result says what the images record', () => {
  it('every disk records the same freeze: quiesced, with its count and time', () => {
    const r = reusedQuiesce([q('vdb'), q('vdc'), q('vdd')]);
    expect(r).toMatchObject({ quiesced: true, frozenFilesystems: 3, frozenAt: AT });
    expect(r.quiesceReason).toMatch(/froze 3 filesystem\(s\) at 2026-12-01T05:00:00.123Z/);
  });

  it('an unquiesced record stays unquiesced, with the recorded reason', () => {
    const r = reusedQuiesce([{ target: 'vdb', record: { quiesced: false, frozenFilesystems: 0, reason: 'domain has no guest agent channel' } }]);
    expect(r).toMatchObject({ quiesced: false, frozenFilesystems: 0 });
    expect(r.quiesceReason).toMatch(/not quiesced: domain has no guest agent channel/);
  });

  it('missing record on any disk: not quiesced, naming the disk', () => {
    const r = reusedQuiesce([q('vdb'), { target: 'vdc' }]);
    expect(r.quiesced).toBe(false);
    expect(r.quiesceReason).toMatch(/vdc record\(s\) no quiesce state/);
  });

  it('disks from different freezes: not quiesced (not one consistent snapshot)', () => {
    const r = reusedQuiesce([q('vdb'), q('vdc', 3, '2026-12-01T05:00:09.000Z')]);
    expect(r.quiesced).toBe(false);
    expect(r.quiesceReason).toMatch(/different freezes/);
    expect(reusedQuiesce([q('vdb', 3), q('vdc', 2)]).quiesced).toBe(false);
  });

  it('mixed quiesced/unquiesced disks: not quiesced, and says inconsistent', () => {
    const r = reusedQuiesce([q('vdb'), { target: 'vdc', record: { quiesced: false, frozenFilesystems: 0 } }]);
    expect(r.quiesced).toBe(false);
    expect(r.quiesceReason).toMatch(/inconsistent/);
  });

  it('quiesced without a freeze time or count (older finalize): not quiesced', () => {
    expect(reusedQuiesce([{ target: 'vdb', record: { quiesced: true, frozenFilesystems: -1 } }]).quiesced).toBe(false);
    expect(reusedQuiesce([]).quiesced).toBe(false);
  });
});

describe('records as stored', () => {
  it('image metadata', () => {
    const meta: Record<string, string> = { [META.quiesced]: 'true', [META.frozenFilesystems]: '1', [META.frozenAt]: AT };
    expect(recordFromMeta((k) => meta[k], KEYS)).toEqual({ quiesced: true, frozenFilesystems: 1, frozenAt: AT });
    expect(recordFromMeta(() => undefined, KEYS)).toBeUndefined();
    expect(recordFromMeta((k) => (k === META.quiesced ? 'yes' : null), KEYS)).toBeUndefined();
    expect(recordFromMeta((k) => (k === META.quiesced ? 'true' : null), KEYS)).toEqual({ quiesced: true, frozenFilesystems: -1 });
  });

  it('a kept snapshot owner record, including one written before the freeze was recorded', () => {
    expect(recordFromObject({ quiesced: true, at: 'x', frozenFilesystems: 1, frozenAt: AT })).toEqual({ quiesced: true, frozenFilesystems: 1, frozenAt: AT });
    expect(recordFromObject({ quiesced: true, at: 'x' })).toEqual({ quiesced: true, frozenFilesystems: -1 });
    expect(recordFromObject('not an object')).toBeUndefined();
    expect(recordFromObject(null)).toBeUndefined();
  });
});

describe('isPredecessor: whose freeze a run may end before its own', () => {
  it('another run of the same workflow id only', () => {
    expect(isPredecessor('snap-1/run-a', 'snap-1', 'run-b')).toBe(true);
    expect(isPredecessor('snap-1/run-b', 'snap-1', 'run-b')).toBe(false);
    expect(isPredecessor('snap-10/run-a', 'snap-1', 'run-b')).toBe(false);
    expect(isPredecessor('operator', 'snap-1', 'run-b')).toBe(false);
    expect(isPredecessor('a/b/run-a', 'a/b', 'run-b')).toBe(true);
    expect(isPredecessor('a/b/run-a', 'a', 'run-b')).toBe(false);
  });
});
