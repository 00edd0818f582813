import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config';
import { connectionOptions } from '../../src/temporal-connection';

/*
 * The Temporal conventions (TEMPORAL_* variables, temporal.toml profiles, as @temporalio/envconfig
 * reads them) reach the connection, under vmsnap's own flags, VMSNAP_* variables and config file;
 * the precedence the README documents, one source against the next.
 */
describe('Temporal settings from the Temporal conventions', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tconv-'));
  const toml = path.join(dir, 'temporal.toml');
  writeFileSync(
    toml,
    `[profile.default]
address = "toml-default:7233"
namespace = "toml-ns"

[profile.prod]
address = "toml-prod:7233"
namespace = "prod-ns"
api_key = "profile-api-key"
[profile.prod.tls]
server_name = "prod.example"
`,
  );
  const json = path.join(dir, 'vmsnap.json');
  writeFileSync(json, JSON.stringify({ temporal: { address: 'file:7233' } }));
  const ca = path.join(dir, 'ca.pem');
  writeFileSync(ca, 'CA-FILE');

  it('TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE alone are used', () => {
    const c = loadConfig({}, { TEMPORAL_ADDRESS: 'conv:7233', TEMPORAL_NAMESPACE: 'conv-ns' }, undefined);
    expect(c.temporal).toMatchObject({ address: 'conv:7233', namespace: 'conv-ns' });
  });

  it('precedence: flag > VMSNAP_* > TEMPORAL_* > config file > temporal.toml > default', () => {
    const env = { TEMPORAL_CONFIG_FILE: toml, TEMPORAL_ADDRESS: 'conv:1', VMSNAP_TEMPORAL_ADDRESS: 'vmsnap:2' };
    expect(loadConfig({ temporal: { address: 'flag:3' } }, env, json).temporal.address).toBe('flag:3');
    expect(loadConfig({}, env, json).temporal.address).toBe('vmsnap:2');
    expect(loadConfig({}, { ...env, VMSNAP_TEMPORAL_ADDRESS: undefined }, json).temporal.address).toBe('conv:1');
    expect(loadConfig({}, { TEMPORAL_CONFIG_FILE: toml }, json).temporal.address).toBe('file:7233');
    const fromToml = loadConfig({}, { TEMPORAL_CONFIG_FILE: toml }, undefined).temporal;
    expect(fromToml).toMatchObject({ address: 'toml-default:7233', namespace: 'toml-ns' });
    expect(loadConfig({}, {}, undefined).temporal).toEqual({ address: '127.0.0.1:7233', namespace: 'default' });
  });

  it('the default temporal.toml is found under XDG_CONFIG_HOME (or ~/.config), as the temporal CLI finds it', () => {
    const xdg = path.join(dir, 'xdg');
    mkdirSync(path.join(xdg, 'temporalio'), { recursive: true });
    writeFileSync(path.join(xdg, 'temporalio', 'temporal.toml'), '[profile.default]\naddress = "xdg:7233"\n');
    expect(loadConfig({}, { XDG_CONFIG_HOME: xdg }, undefined).temporal.address).toBe('xdg:7233');
    const home = path.join(dir, 'home');
    mkdirSync(path.join(home, '.config', 'temporalio'), { recursive: true });
    writeFileSync(path.join(home, '.config', 'temporalio', 'temporal.toml'), '[profile.default]\naddress = "home:7233"\n');
    expect(loadConfig({}, { HOME: home }, undefined).temporal.address).toBe('home:7233');
  });

  it('TEMPORAL_PROFILE selects a profile; its inline API key reaches the connection but not the config', () => {
    const c = loadConfig({}, { TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' }, undefined);
    expect(c.temporal).toMatchObject({ address: 'toml-prod:7233', namespace: 'prod-ns', tls: { serverName: 'prod.example' } });
    const o = connectionOptions(c) as { apiKey: string; tls: { serverNameOverride: string } };
    expect(o.apiKey).toBe('profile-api-key');
    expect(o.tls.serverNameOverride).toBe('prod.example');
    expect(JSON.stringify(c)).not.toContain('profile-api-key');
    // A copy of the config that keeps its temporal section keeps the key (tests and harnesses spread configs).
    expect((connectionOptions({ ...c, host: 'other' }) as { apiKey: string }).apiKey).toBe('profile-api-key');
  });

  it('TEMPORAL_API_KEY and TEMPORAL_TLS_* variables: key, TLS files and inline data', () => {
    const o = connectionOptions(
      loadConfig({}, { TEMPORAL_API_KEY: 'env-api-key', TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca, TEMPORAL_TLS_CLIENT_CERT_DATA: 'CRT-DATA', TEMPORAL_TLS_CLIENT_KEY_DATA: 'KEY-DATA', TEMPORAL_GRPC_META_X_TENANT: 't1' }, undefined),
    ) as { apiKey: string; tls: { serverRootCACertificate: Buffer; clientCertPair: { crt: Buffer; key: Buffer } }; metadata: Record<string, string> };
    expect(o.apiKey).toBe('env-api-key');
    expect(o.tls.serverRootCACertificate.toString()).toBe('CA-FILE');
    expect(o.tls.clientCertPair.crt.toString()).toBe('CRT-DATA');
    expect(o.tls.clientCertPair.key.toString()).toBe('KEY-DATA');
    expect(o.metadata).toEqual({ 'x-tenant': 't1' });
  });

  it('TEMPORAL_TLS=true switches TLS on with system roots; TEMPORAL_TLS=false keeps it off even with an API key', () => {
    expect(connectionOptions(loadConfig({}, { TEMPORAL_TLS: 'true' }, undefined)).tls).toEqual({});
    const off = connectionOptions(loadConfig({}, { TEMPORAL_TLS: 'false', TEMPORAL_API_KEY: 'k' }, undefined));
    expect(off.tls).toBe(false);
  });

  it('VMSNAP_* paths beat the conventions field by field', () => {
    const c = loadConfig({}, { VMSNAP_TEMPORAL_TLS_CA: ca, TEMPORAL_TLS_SERVER_CA_CERT_DATA: 'INLINE-CA', TEMPORAL_NAMESPACE: 'conv-ns' }, undefined);
    expect((connectionOptions(c) as { tls: { serverRootCACertificate: Buffer } }).tls.serverRootCACertificate.toString()).toBe('CA-FILE');
    expect(c.temporal.namespace).toBe('conv-ns');
  });

  it('a missing profile or an unreadable TEMPORAL_CONFIG_FILE is a config error, not a silent default', () => {
    expect(() => loadConfig({}, { TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'nope' }, undefined)).toThrow(ConfigError);
    expect(() => loadConfig({}, { TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'nope' }, undefined)).toThrow(/Profile 'nope' not found/);
    expect(() => loadConfig({}, { TEMPORAL_CONFIG_FILE: path.join(dir, 'absent.toml') }, undefined)).toThrow(/TEMPORAL_CONFIG_FILE .* cannot be read/);
    expect(() => loadConfig({}, { TEMPORAL_ADDRESS: 'no port' }, undefined)).toThrow(/temporal.address must be host:port/);
  });
});
