import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { XdrError, XdrReader, XdrWriter } from '../../src/libvirt/xdr';

describe('XDR codec', () => {
  it('encodes ints, strings and optional strings as libvirt does (big-endian, 4-byte padding)', () => {
    const bytes = new XdrWriter().int(-1).uint(0x20008086).string('abcde').optionalString(null).optionalString('x').toBuffer();
    expect(bytes.toString('hex')).toBe(
      'ffffffff' + '20008086' + '00000005' + '6162636465000000' + '00000000' + '00000001' + '00000001' + '78000000',
    );
  });

  it('encodes a fixed opaque (the 16-byte UUID) without a length word', () => {
    const uuid = Buffer.from('6f1c2a4e3b5d4c7e9a8b1d2e3f405162', 'hex');
    expect(new XdrWriter().fixedOpaque(uuid).toBuffer()).toEqual(uuid);
  });

  it('round-trips every supported type', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -0x8000_0000, max: 0x7fff_ffff }),
        fc.integer({ min: 0, max: 0xffff_ffff }),
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        fc.string({ unit: 'grapheme' }),
        fc.option(fc.string(), { nil: null }),
        fc.uint8Array({ maxLength: 40 }),
        fc.array(fc.string(), { maxLength: 5 }),
        (i, u, h, s, opt, bytes, list) => {
          const w = new XdrWriter(1)
            .int(i)
            .uint(u)
            .hyper(h)
            .string(s)
            .optionalString(opt)
            .opaque(bytes)
            .array(list, (ww, x) => ww.string(x));
          const buf = w.toBuffer();
          expect(buf.length % 4).toBe(0);
          const r = new XdrReader(buf);
          expect(r.int()).toBe(i);
          expect(r.uint()).toBe(u);
          expect(r.hyper()).toBe(h);
          expect(r.string()).toBe(s);
          expect(r.optionalString()).toBe(opt);
          expect(new Uint8Array(r.opaque())).toEqual(bytes);
          expect(r.array((rr) => rr.string())).toEqual(list);
          r.end();
        },
      ),
    );
  });

  it('rejects values that do not fit', () => {
    expect(() => new XdrWriter().int(2 ** 31)).toThrow(XdrError);
    expect(() => new XdrWriter().uint(-1)).toThrow(XdrError);
    expect(() => new XdrWriter().int(1.5)).toThrow(XdrError);
  });

  it('fails cleanly on truncated input, bad bools, oversized lengths and trailing bytes', () => {
    expect(() => new XdrReader(Buffer.from('000000', 'hex')).int()).toThrow(/need 4 bytes/);
    expect(() => new XdrReader(Buffer.from('00000002', 'hex')).bool()).toThrow(/bool/);
    expect(() => new XdrReader(Buffer.from('7fffffff', 'hex')).string()).toThrow(/exceeds limit/);
    expect(() => new XdrReader(Buffer.from('0000000561', 'hex')).string()).toThrow(XdrError);
    const r = new XdrReader(Buffer.from('0000000100000002', 'hex'));
    r.int();
    expect(() => r.end()).toThrow(/trailing/);
  });
});
