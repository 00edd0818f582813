import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { connectionOptions } from '../../src/temporal-connection';

/*
 * TLS/mTLS and API-key plumbing: the files named in config reach the SDK's connection options, and
 * no key material sits in config values. The mTLS options are checked end to end, against a real
 * mutual-TLS frontend in front of the lab's Temporal, in test/integration/temporal-tls.test.ts; the
 * API key only here (the dev server does not check keys).
 */
describe('Temporal connection options', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tls-'));
  const ca = path.join(dir, 'ca.pem');
  const crt = path.join(dir, 'client.pem');
  const key = path.join(dir, 'client.key');
  const apiKey = path.join(dir, 'api-key');
  writeFileSync(ca, 'CA');
  writeFileSync(crt, 'CRT');
  writeFileSync(key, 'KEY');
  writeFileSync(apiKey, 'secret-api-key\n');

  it('mTLS: CA, client cert and key are read from their paths', () => {
    const c = loadConfig({}, { VMSNAP_TEMPORAL_TLS_CA: ca, VMSNAP_TEMPORAL_TLS_CERT: crt, VMSNAP_TEMPORAL_TLS_KEY: key, VMSNAP_TEMPORAL_TLS_SERVER_NAME: 'temporal.example' }, undefined);
    const o = connectionOptions(c) as { tls: { serverRootCACertificate: Buffer; clientCertPair: { crt: Buffer; key: Buffer }; serverNameOverride: string } };
    expect(o.tls.serverRootCACertificate.toString()).toBe('CA');
    expect(o.tls.clientCertPair.crt.toString()).toBe('CRT');
    expect(o.tls.clientCertPair.key.toString()).toBe('KEY');
    expect(o.tls.serverNameOverride).toBe('temporal.example');
    expect(JSON.stringify(c)).not.toContain('KEY"');
  });

  it('API key: read from a file, TLS switched on', () => {
    const c = loadConfig({}, { VMSNAP_TEMPORAL_API_KEY_FILE: apiKey }, undefined);
    const o = connectionOptions(c) as { apiKey: string; tls: unknown };
    expect(o.apiKey).toBe('secret-api-key');
    expect(o.tls).toBe(true);
    expect(JSON.stringify(c)).not.toContain('secret-api-key');
  });

  it('half a client pair is a config error, not a silently dropped certificate', () => {
    expect(() => loadConfig({}, { VMSNAP_TEMPORAL_TLS_CERT: crt }, undefined)).toThrow(/certPath and keyPath go together/);
    expect(() => loadConfig({}, { VMSNAP_TEMPORAL_TLS_KEY: key, VMSNAP_TEMPORAL_TLS_CA: ca }, undefined)).toThrow(/certPath and keyPath go together/);
    // A server name alone switches TLS on (system roots), it is not ignored.
    const o = connectionOptions(loadConfig({}, { VMSNAP_TEMPORAL_TLS_SERVER_NAME: 'temporal.example' }, undefined)) as { tls: { serverNameOverride: string } };
    expect(o.tls.serverNameOverride).toBe('temporal.example');
  });

  it('plain: no TLS unless configured', () => {
    expect(connectionOptions(loadConfig({}, {}, undefined))).toEqual({ address: '127.0.0.1:7233' });
  });
});
