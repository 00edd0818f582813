import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import { connectionOptions } from '../../src/temporal-connection';

/*
 * TLS/mTLS and API-key plumbing. The Temporal dev server (CLI 1.5.1) has no TLS listener, so the
 * end-to-end check against a TLS frontend is manual (README); this proves the files named in
 * config reach the SDK's connection options, and that no key material sits in config values.
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

  it('plain: no TLS unless configured', () => {
    expect(connectionOptions(loadConfig({}, {}, undefined))).toEqual({ address: '127.0.0.1:7233' });
  });
});
