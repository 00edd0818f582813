/**
 * Framing of libvirt RPC messages (src/rpc/virnetprotocol.x): every message is a 4-byte
 * big-endian length that counts itself, a 24-byte `virNetMessageHeader`, then the XDR payload.
 */
import { XdrError, XdrReader, XdrWriter } from './xdr';

export const LENGTH_BYTES = 4;
export const HEADER_BYTES = 24;
/** VIR_NET_MESSAGE_MAX (16 MiB) plus the length word, which that limit does not count. */
export const MAX_FRAME_BYTES = 16_777_216 + LENGTH_BYTES;

/** virNetMessageType */
export const MessageType = {
  Call: 0,
  Reply: 1,
  Message: 2,
  Stream: 3,
  CallWithFds: 4,
  ReplyWithFds: 5,
} as const;

/** virNetMessageStatus */
export const MessageStatus = {
  Ok: 0,
  Error: 1,
  Continue: 2,
} as const;

export interface MessageHeader {
  program: number;
  version: number;
  procedure: number;
  type: number;
  serial: number;
  status: number;
}

export interface Frame {
  header: MessageHeader;
  payload: Buffer;
}

export function encodeFrame(header: MessageHeader, payload: Buffer = Buffer.alloc(0)): Buffer {
  const w = new XdrWriter(LENGTH_BYTES + HEADER_BYTES);
  w.uint(LENGTH_BYTES + HEADER_BYTES + payload.length)
    .uint(header.program)
    .uint(header.version)
    .int(header.procedure)
    .int(header.type)
    .uint(header.serial)
    .int(header.status);
  return Buffer.concat([w.toBuffer(), payload]);
}

/** Decodes one complete frame (length word included). */
export function decodeFrame(bytes: Buffer): Frame {
  const r = new XdrReader(bytes);
  const length = r.uint();
  if (length !== bytes.length) {
    throw new XdrError(`frame length word says ${length}, frame has ${bytes.length} bytes`);
  }
  const header: MessageHeader = {
    program: r.uint(),
    version: r.uint(),
    procedure: r.int(),
    type: r.int(),
    serial: r.uint(),
    status: r.int(),
  };
  return { header, payload: bytes.subarray(LENGTH_BYTES + HEADER_BYTES) };
}

/**
 * Reassembles frames from a byte stream: socket reads split and merge messages arbitrarily.
 * Chunks are only concatenated once a whole frame is buffered, so a large reply arriving in many
 * reads is copied once, not once per read.
 */
export class FrameSplitter {
  private chunks: Buffer[] = [];
  private size = 0;

  /** Feeds bytes and returns every frame completed by them, in order. Throws on a corrupt length. */
  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.size += chunk.length;
    const frames: Frame[] = [];
    while (this.size >= LENGTH_BYTES) {
      if (this.chunks[0].length < LENGTH_BYTES) this.merge();
      const length = this.chunks[0].readUInt32BE(0);
      if (length < LENGTH_BYTES + HEADER_BYTES || length > MAX_FRAME_BYTES) {
        throw new XdrError(`invalid frame length ${length}`);
      }
      if (this.size < length) break;
      if (this.chunks[0].length < length) this.merge();
      const head = this.chunks[0];
      frames.push(decodeFrame(Buffer.from(head.subarray(0, length))));
      if (head.length === length) this.chunks.shift();
      else this.chunks[0] = head.subarray(length);
      this.size -= length;
    }
    return frames;
  }

  private merge(): void {
    this.chunks = [Buffer.concat(this.chunks)];
  }
}
