import net from 'node:net';

/**
 * A TCP proxy in front of a real gRPC server that lets a client connect and make `calls` calls,
 * then drops the connection and stops listening when the client starts the next one: the server
 * goes away after the client found it. Calls are counted as the client's HTTP/2 HEADERS frames
 * that open a stream (RFC 9113: a 24-byte preface, then 9-byte frame headers).
 */
export async function grpcCutProxy(target: { host: string; port: number }, calls: number): Promise<{ address: string; cut: Promise<void>; close: () => void }> {
  let opened = 0;
  let done!: () => void;
  const cut = new Promise<void>((r) => (done = r));
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    let buf = Buffer.alloc(0);
    let preface = true;
    const streams = new Set<number>();
    client.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const out: Buffer[] = [];
      if (preface) {
        if (buf.length < 24) return;
        out.push(buf.subarray(0, 24));
        buf = buf.subarray(24);
        preface = false;
      }
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        const type = buf[3]!;
        const stream = buf.readUInt32BE(5) & 0x7fffffff;
        if (type === 0x1 && !streams.has(stream)) {
          streams.add(stream);
          if (++opened > calls) {
            if (out.length) upstream.write(Buffer.concat(out));
            server.close();
            for (const s of sockets) s.destroy();
            done();
            return;
          }
        }
        out.push(buf.subarray(0, 9 + len));
        buf = buf.subarray(9 + len);
      }
      if (out.length) upstream.write(Buffer.concat(out));
    });
    upstream.on('data', (b: Buffer) => client.write(b));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    cut,
    close: () => {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}
