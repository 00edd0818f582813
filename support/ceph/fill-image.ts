/** Writes `bytes` of deterministic, non-repeating data from offset 0, in 4 MiB writes. */
export async function fillImage(image: { write(o: number, b: Buffer): Promise<number> }, bytes: number, seed = 1): Promise<void> {
  const chunk = 4 << 20;
  for (let off = 0; off < bytes; off += chunk) {
    const len = Math.min(chunk, bytes - off);
    const buf = Buffer.alloc(len + 4);
    for (let i = 0; i < len; i += 4) buf.writeUInt32LE(((off + i) * 2654435761 + seed) >>> 0, i);
    await image.write(off, buf.subarray(0, len));
  }
}
