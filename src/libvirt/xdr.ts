/**
 * XDR (RFC 4506) encoding for the subset libvirt's remote protocol uses: 32-bit ints, 64-bit
 * hypers, strings, fixed and variable opaque data, optional values (`*` pointers) and
 * variable-length arrays. Everything is big-endian and padded to 4 bytes.
 */

export class XdrError extends Error {
  override readonly name = 'XdrError';
}

/** libvirt's own cap on strings (VIR_NET_MESSAGE_STRING_MAX); a larger length means a bad frame. */
const STRING_MAX = 4_194_304;

export class XdrWriter {
  private buf: Buffer;
  private len = 0;

  constructor(initialSize = 256) {
    this.buf = Buffer.alloc(initialSize);
  }

  int(value: number): this {
    if (!Number.isInteger(value) || value < -0x8000_0000 || value > 0x7fff_ffff) {
      throw new XdrError(`int out of range: ${value}`);
    }
    this.reserve(4).writeInt32BE(value, this.len - 4);
    return this;
  }

  uint(value: number): this {
    if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
      throw new XdrError(`unsigned int out of range: ${value}`);
    }
    this.reserve(4).writeUInt32BE(value, this.len - 4);
    return this;
  }

  hyper(value: bigint): this {
    this.reserve(8).writeBigInt64BE(value, this.len - 8);
    return this;
  }

  uhyper(value: bigint): this {
    this.reserve(8).writeBigUInt64BE(value, this.len - 8);
    return this;
  }

  bool(value: boolean): this {
    return this.int(value ? 1 : 0);
  }

  string(value: string): this {
    return this.opaque(Buffer.from(value, 'utf8'));
  }

  /** `remote_string`: an optional string, i.e. a bool "present" followed by the string. */
  optionalString(value: string | null | undefined): this {
    if (value === null || value === undefined) return this.bool(false);
    return this.bool(true).string(value);
  }

  /** Variable-length opaque: length, bytes, zero padding. */
  opaque(bytes: Uint8Array): this {
    this.uint(bytes.length);
    return this.fixedOpaque(bytes);
  }

  /** Fixed-length opaque (e.g. the 16-byte UUID): bytes and zero padding, no length. */
  fixedOpaque(bytes: Uint8Array): this {
    const padded = pad4(bytes.length);
    const target = this.reserve(padded);
    const start = this.len - padded;
    target.set(bytes, start);
    target.fill(0, start + bytes.length, this.len);
    return this;
  }

  array<T>(items: readonly T[], writeItem: (w: this, item: T) => void): this {
    this.uint(items.length);
    for (const item of items) writeItem(this, item);
    return this;
  }

  /** A copy of the bytes written so far. */
  toBuffer(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.len));
  }

  private reserve(n: number): Buffer {
    if (this.len + n > this.buf.length) {
      const next = Buffer.alloc(Math.max(this.buf.length * 2, this.len + n));
      this.buf.copy(next, 0, 0, this.len);
      this.buf = next;
    }
    this.len += n;
    return this.buf;
  }
}

export class XdrReader {
  private pos = 0;

  constructor(private readonly buf: Buffer) {}

  get offset(): number {
    return this.pos;
  }

  get remaining(): number {
    return this.buf.length - this.pos;
  }

  int(): number {
    return this.take(4).readInt32BE(0);
  }

  uint(): number {
    return this.take(4).readUInt32BE(0);
  }

  hyper(): bigint {
    return this.take(8).readBigInt64BE(0);
  }

  uhyper(): bigint {
    return this.take(8).readBigUInt64BE(0);
  }

  bool(): boolean {
    const v = this.int();
    if (v !== 0 && v !== 1) throw new XdrError(`bool must be 0 or 1, got ${v}`);
    return v === 1;
  }

  string(): string {
    return this.opaque(STRING_MAX).toString('utf8');
  }

  optionalString(): string | null {
    return this.bool() ? this.string() : null;
  }

  optional<T>(readValue: (r: this) => T): T | null {
    return this.bool() ? readValue(this) : null;
  }

  opaque(max = Number.MAX_SAFE_INTEGER): Buffer {
    const n = this.uint();
    if (n > max) throw new XdrError(`opaque length ${n} exceeds limit ${max}`);
    return this.fixedOpaque(n);
  }

  fixedOpaque(n: number): Buffer {
    const bytes = this.take(pad4(n));
    return Buffer.from(bytes.subarray(0, n));
  }

  array<T>(readItem: (r: this) => T, max = 65_536): T[] {
    const n = this.uint();
    if (n > max) throw new XdrError(`array length ${n} exceeds limit ${max}`);
    const items: T[] = [];
    for (let i = 0; i < n; i++) items.push(readItem(this));
    return items;
  }

  /** Reply payloads must be consumed exactly; trailing bytes mean we decoded the wrong struct. */
  end(): void {
    if (this.remaining !== 0) throw new XdrError(`${this.remaining} trailing bytes after decode`);
  }

  private take(n: number): Buffer {
    if (this.pos + n > this.buf.length) {
      throw new XdrError(`need ${n} bytes at offset ${this.pos}, have ${this.remaining}`);
    }
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

function pad4(n: number): number {
  return (n + 3) & ~3;
}
