import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { loadConfig } from '../../src/config';
import { connectionOptions } from '../../src/temporal-connection';
import { domainLock, releaseLock } from '../../workflows/domain-lock';
import { json, vmsnapCli } from '../helpers/cli';
import { CephView } from '../helpers/ceph-inspect';
import { uniqueId } from '../helpers/harness';
import { labVars, need } from '../../support/lab/env';
import { WorkerProcess } from '../helpers/worker-process';
import type { SnapshotResult } from '../../src/model/types';
import { makeCa, makeLeaf, startMtlsProxy } from '../helpers/tls';
import type { CertFiles, MtlsProxy } from '../helpers/tls';

/*
 * Temporal over mutual TLS, end to end. The dev server (CLI 1.5.1) has no TLS listener, so a real
 * mTLS frontend stands in front of it: a Node TLS-terminating proxy (ALPN h2, client certificate
 * required, signed by our CA) piping to the lab's plain Temporal port, with certificates made by
 * the `openssl` CLI. vmsnap's own config path is used (env → loadConfig → connectionOptions), for
 * the client (grpc-js), the worker's NativeConnection (Rust core, rustls) and the CLI; and the
 * three ways it must refuse: no client certificate, a client certificate from another CA, and a
 * server name the server certificate does not carry.
 */

const TARGET = process.env.TEMPORAL_ADDRESS || '127.0.0.1:7233';
const SERVER_NAME = 'temporal.vmsnap.test';

let dir: string;
let ca: CertFiles;
let server: CertFiles;
let client: CertFiles;
let rogueClient: CertFiles;
let proxy: MtlsProxy;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-tls-'));
  ca = makeCa(dir, 'vmsnap-test-ca');
  server = makeLeaf(dir, 'temporal-server', ca, 'serverAuth', `DNS:${SERVER_NAME},IP:127.0.0.1`);
  client = makeLeaf(dir, 'vmsnap-client', ca, 'clientAuth', 'DNS:vmsnap-client.vmsnap.test');
  const rogueCa = makeCa(dir, 'rogue-ca');
  rogueClient = makeLeaf(dir, 'rogue-client', rogueCa, 'clientAuth', 'DNS:vmsnap-client.vmsnap.test');
  proxy = await startMtlsProxy({ server, clientCa: ca.cert, target: TARGET });
});

afterAll(async () => {
  await proxy?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The environment an operator sets for a TLS frontend; `over` changes or (undefined) drops a variable. */
function tlsEnv(address: string, over: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string | undefined> = {
    VMSNAP_TEMPORAL_ADDRESS: address,
    VMSNAP_TEMPORAL_NAMESPACE: 'default',
    VMSNAP_TEMPORAL_TLS_CA: ca.cert,
    VMSNAP_TEMPORAL_TLS_CERT: client.cert,
    VMSNAP_TEMPORAL_TLS_KEY: client.key,
    VMSNAP_TEMPORAL_TLS_SERVER_NAME: SERVER_NAME,
    ...over,
  };
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
}

/** vmsnap's real config path: environment → loadConfig → connectionOptions. */
const optionsFor = (env: Record<string, string>) => connectionOptions(loadConfig({}, env, undefined));

/**
 * What `p` saw while `fn` ran. With `refusal`, also waits (up to 2 s) for the proxy's side of a
 * refused handshake: the client may see its connection dropped before the proxy's socket closes.
 */
async function watched<T>(p: MtlsProxy, fn: () => Promise<T>, refusal = false): Promise<{ result: T; forwarded: number; tlsErrors: string[] }> {
  const f0 = p.forwarded;
  const e0 = p.tlsErrors.length;
  const result = await fn();
  for (const until = Date.now() + 2000; refusal && p.tlsErrors.length === e0 && Date.now() < until; ) await sleep(20);
  return { result, forwarded: p.forwarded - f0, tlsErrors: p.tlsErrors.slice(e0) };
}

/** A client connection plus real calls (system info, the default namespace); closes what it opened. */
async function clientCalls(opts: ReturnType<typeof optionsFor>) {
  // Connection.connect would leave a refused channel retrying in the background: connect lazily
  // so it is always closed.
  const conn = Connection.lazy({ ...opts, connectTimeout: '3s' });
  try {
    await conn.ensureConnected();
    const info = await conn.workflowService.getSystemInfo({});
    const ns = await conn.workflowService.describeNamespace({ namespace: 'default' });
    return { serverVersion: info.serverVersion, namespace: ns.namespaceInfo?.name };
  } finally {
    await conn.close();
  }
}

/** The worker's connection (Rust core); connecting already calls GetSystemInfo. */
async function nativeCalls(opts: ReturnType<typeof optionsFor>) {
  const conn = await NativeConnection.connect(opts);
  try {
    const ns = await conn.workflowService.describeNamespace({ namespace: 'default' });
    return { namespace: ns.namespaceInfo?.name };
  } finally {
    await conn.close();
  }
}

const failure = <T>(p: Promise<T>): Promise<Error | undefined> =>
  p.then(
    () => undefined,
    (err: unknown) => err as Error,
  );

describe('Temporal through a mutual-TLS frontend', () => {
  it('client and worker connections: real calls pass through mTLS with the configured certificates', async () => {
    const opts = optionsFor(tlsEnv(proxy.address));
    expect(opts.address).toBe(proxy.address);
    const c = await watched(proxy, () => clientCalls(opts));
    expect(c.result.serverVersion).toBeTruthy();
    expect(c.result.namespace).toBe('default');
    expect(c.forwarded).toBeGreaterThan(0);
    expect(c.tlsErrors).toEqual([]);

    const n = await watched(proxy, () => nativeCalls(opts));
    expect(n.result.namespace).toBe('default');
    expect(n.forwarded).toBeGreaterThan(0);
    expect(n.tlsErrors).toEqual([]);
    expect(new Set(proxy.clientSubjects)).toEqual(new Set(['vmsnap-client']));
  });

  it('without a server name the address is checked against the certificate (IP SAN 127.0.0.1)', async () => {
    const opts = optionsFor(tlsEnv(proxy.address, { VMSNAP_TEMPORAL_TLS_SERVER_NAME: undefined }));
    expect((await clientCalls(opts)).namespace).toBe('default');
    expect((await nativeCalls(opts)).namespace).toBe('default');
  });

  it('a Worker on a TLS NativeConnection runs a workflow started by a TLS client; the CLI reads it back', async () => {
    const opts = optionsFor(tlsEnv(proxy.address));
    const taskQueue = uniqueId('vmsnap-tls');
    const workflowId = uniqueId('tls-roundtrip');
    const { forwarded, tlsErrors } = await watched(proxy, async () => {
      const native = await NativeConnection.connect(opts);
      const conn = Connection.lazy({ ...opts, connectTimeout: '3s' });
      try {
        await conn.ensureConnected();
        const worker = await Worker.create({
          connection: native,
          namespace: 'default',
          taskQueue,
          // The smallest workflow in the repository: holds until signalled.
          workflowsPath: path.resolve(__dirname, '../../workflows/domain-lock.ts'),
        });
        const temporal = new Client({ connection: conn, namespace: 'default' });
        await worker.runUntil(async () => {
          const handle = await temporal.workflow.start(domainLock, {
            taskQueue,
            workflowId,
            args: [{ workflowId: 'tls-test', runId: 'tls-test' }],
            workflowExecutionTimeout: '30s',
          });
          await handle.signal(releaseLock);
          await handle.result();
        });
      } finally {
        await conn.close();
        await native.close();
      }
    });
    expect(forwarded).toBeGreaterThanOrEqual(2);
    expect(tlsErrors).toEqual([]);

    // The operator's CLI, with nothing but the TLS environment, through the same frontend.
    const r = await vmsnapCli(['status', workflowId, '--json'], { PATH: process.env.PATH, HOME: process.env.HOME, ...tlsEnv(proxy.address) }, 30_000);
    expect(r.code, r.stderr).toBe(0);
    expect(json<{ status: string; taskQueue: string }>(r)).toMatchObject({ status: 'COMPLETED', taskQueue });
  });

  it('the shipped `vmsnap worker` runs a snapshot over mTLS; no key material in its logs or the history', async () => {
    const vars = labVars();
    const env = tlsEnv(proxy.address);
    const w = new WorkerProcess({ ...vars, TEMPORAL_ADDRESS: proxy.address }, `tls-${uniqueId('h').slice(2)}`, env);
    const conn = Connection.lazy({ ...optionsFor(env), connectTimeout: '3s' });
    try {
      await w.start();
      const temporal = new Client({ connection: conn, namespace: 'default' });
      const id = uniqueId('tls-snap');
      const result: SnapshotResult = await temporal.workflow.execute('consistentSnapshot', {
        taskQueue: w.taskQueue,
        workflowId: id,
        args: [{ domain: need(vars, 'VMSNAP_GUEST_1DISK'), quiesce: 'require' }],
      });
      expect(result.quiesced).toBe(true);
      const history = JSON.stringify(await temporal.workflow.getHandle(id).fetchHistory());
      const logs = w.logs.join('');
      // The key's base64 body, line by line, and the paths of key and certificate.
      const keyLines = readFileSync(client.key, 'utf8').split('\n').filter((l) => l && !l.startsWith('-----'));
      for (const text of [history, logs]) {
        for (const l of keyLines) expect(text).not.toContain(l);
        expect(text).not.toContain(client.key);
        expect(text).not.toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY-----/);
      }
      const ceph = new CephView(vars);
      await ceph.removeResultImages(result);
    } finally {
      await w.stop();
      await conn.close();
    }
  });

  interface Refusal {
    name: string;
    env: (address: string) => Record<string, string>;
    /** What the proxy logs for the client (grpc-js) and the worker (rustls) connection. */
    proxySaw: { client: RegExp; native: RegExp };
    /**
     * What the worker's connection reports. The client only says "Failed to connect before the
     * deadline". Refused by the server, TLS 1.3 lets the client finish its side of the handshake, so
     * rustls fails on the first call (GetSystemInfo) with the alert, a reset or a cancelled stream,
     * whichever it sees first: only the proxy's side says why.
     */
    nativeError: RegExp;
  }
  const refusals: Refusal[] = [
    {
      name: 'no client certificate (CA only)',
      env: (a) => tlsEnv(a, { VMSNAP_TEMPORAL_TLS_CERT: undefined, VMSNAP_TEMPORAL_TLS_KEY: undefined }),
      proxySaw: { client: /peer did not return a certificate/, native: /peer did not return a certificate/ },
      nativeError: /Failed to call GetSystemInfo/,
    },
    {
      name: 'a client certificate from an untrusted CA',
      env: (a) => tlsEnv(a, { VMSNAP_TEMPORAL_TLS_CERT: rogueClient.cert, VMSNAP_TEMPORAL_TLS_KEY: rogueClient.key }),
      proxySaw: { client: /\[UNABLE_TO_VERIFY_LEAF_SIGNATURE\]/, native: /\[UNABLE_TO_VERIFY_LEAF_SIGNATURE\]/ },
      nativeError: /Failed to call GetSystemInfo/,
    },
    {
      name: 'a server name the server certificate does not carry',
      env: (a) => tlsEnv(a, { VMSNAP_TEMPORAL_TLS_SERVER_NAME: 'wrong.vmsnap.test' }),
      // grpc-js drops the socket mid-handshake; rustls sends a bad_certificate alert.
      proxySaw: { client: /socket hang up/, native: /alert bad certificate/ },
      nativeError: /NotValidForName/,
    },
  ];

  // Concurrent (the client's refusals each wait out its 3 s connect timeout); each case has a proxy
  // of its own, so nothing from another case (a retrying channel) is counted in it.
  for (const r of refusals) {
    it.concurrent(`refused: ${r.name}`, async ({ expect }) => {
      const own = await startMtlsProxy({ server, clientCa: ca.cert, target: TARGET });
      try {
        const opts = optionsFor(r.env(own.address));
        const c = await watched(own, () => failure(clientCalls(opts)), true);
        expect(c.result, 'the client connection must fail').toBeInstanceOf(Error);
        expect(c.forwarded, 'nothing may reach Temporal').toBe(0);
        expect(c.tlsErrors.join('\n')).toMatch(r.proxySaw.client);

        const n = await watched(own, () => failure(nativeCalls(opts)), true);
        expect(n.result, 'the worker connection must fail').toBeInstanceOf(Error);
        expect(n.result!.message).toMatch(r.nativeError);
        expect(n.forwarded, 'nothing may reach Temporal').toBe(0);
        expect(n.tlsErrors.join('\n')).toMatch(r.proxySaw.native);
      } finally {
        await own.close();
      }
    });
  }
});
