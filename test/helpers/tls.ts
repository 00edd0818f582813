import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';

/*
 * A throw-away PKI made with the `openssl` CLI (argv arrays, no shell), and a mutual-TLS
 * terminating proxy in front of a plain TCP service: the Temporal dev server has no TLS listener,
 * so this is the TLS frontend the SDK's connections are checked against.
 */

export interface CertFiles {
  cert: string;
  key: string;
}

function openssl(cwd: string, argv: string[]): void {
  execFileSync('openssl', argv, { cwd, stdio: ['ignore', 'ignore', 'pipe'], timeout: 20_000 });
}

function newKey(dir: string, name: string): string {
  const key = path.join(dir, `${name}.key`);
  // PKCS#8 PEM, P-256: what both Node (OpenSSL) and the worker's Rust core (rustls) accept.
  openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key]);
  return key;
}

function sign(dir: string, name: string, subject: string, ext: string[], issuer?: CertFiles): CertFiles {
  const key = newKey(dir, name);
  const csr = path.join(dir, `${name}.csr`);
  const extFile = path.join(dir, `${name}.ext`);
  const cert = path.join(dir, `${name}.pem`);
  writeFileSync(extFile, ext.join('\n') + '\n');
  openssl(dir, ['req', '-new', '-key', key, '-subj', subject, '-out', csr]);
  const by = issuer ? ['-CA', issuer.cert, '-CAkey', issuer.key] : ['-signkey', key];
  const serial = `0x${randomBytes(12).toString('hex')}`;
  openssl(dir, ['x509', '-req', '-in', csr, ...by, '-set_serial', serial, '-days', '2', '-sha256', '-extfile', extFile, '-out', cert]);
  return { cert, key };
}

export function makeCa(dir: string, name: string): CertFiles {
  return sign(dir, name, `/CN=${name}`, ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign', 'subjectKeyIdentifier=hash']);
}

export function makeLeaf(dir: string, name: string, ca: CertFiles, usage: 'serverAuth' | 'clientAuth', san: string): CertFiles {
  return sign(
    dir,
    name,
    `/CN=${name}`,
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      `extendedKeyUsage=${usage}`,
      `subjectAltName=${san}`,
      'subjectKeyIdentifier=hash',
      'authorityKeyIdentifier=keyid',
    ],
    ca,
  );
}

export interface MtlsProxy {
  /** `127.0.0.1:<port>` */
  address: string;
  /**
   * Handshakes the proxy refused or the client aborted (`tlsClientError`), with the reason a
   * client certificate was refused when there was one (e.g. `UNABLE_TO_VERIFY_LEAF_SIGNATURE`).
   */
  tlsErrors: string[];
  /** Connections that completed mutual TLS and were piped to the target. */
  forwarded: number;
  /** Subjects (CN) of the client certificates it accepted. */
  clientSubjects: string[];
  close(): Promise<void>;
}

/**
 * Listens on 127.0.0.1:<ephemeral> with TLS (ALPN h2), requires a client certificate signed by
 * `clientCa`, and pipes each accepted connection to `target` (host:port) over plain TCP.
 */
export async function startMtlsProxy(opts: { server: CertFiles; clientCa: string; target: string }): Promise<MtlsProxy> {
  const [host, port] = splitHostPort(opts.target);
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const proxy: MtlsProxy = {
    address: '',
    tlsErrors: [],
    forwarded: 0,
    clientSubjects: [],
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = tls.createServer(
    {
      cert: readFileSync(opts.server.cert),
      key: readFileSync(opts.server.key),
      ca: readFileSync(opts.clientCa),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
      minVersion: 'TLSv1.2',
    },
    (front) => {
      proxy.forwarded++;
      const cn = front.getPeerCertificate()?.subject?.CN;
      if (cn) proxy.clientSubjects.push(String(cn));
      const back = net.connect(port, host);
      track(front);
      track(back);
      const end = () => {
        front.destroy();
        back.destroy();
      };
      front.on('error', end).on('close', end);
      back.on('error', end).on('close', end);
      front.pipe(back);
      back.pipe(front);
    },
  );
  server.on('connection', track);
  // An untrusted client certificate is checked by Node after the handshake, which then drops the
  // socket ("socket hang up"); the verification result is on the socket.
  server.on('tlsClientError', (err, socket) =>
    proxy.tlsErrors.push(socket.authorizationError ? `${err.message} [${String(socket.authorizationError)}]` : err.message),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  proxy.address = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return proxy;
}

function splitHostPort(hp: string): [string, number] {
  const i = hp.lastIndexOf(':');
  return [hp.slice(0, i), Number(hp.slice(i + 1))];
}
