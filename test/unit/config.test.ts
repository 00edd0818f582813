import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config';

describe('configuration', () => {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'cfg-')), 'vmsnap.json');
  writeFileSync(file, JSON.stringify({ temporal: { address: 'file:1', namespace: 'from-file' }, ceph: { id: 'file-id' }, host: 'file-host' }));

  it('flags beat environment beat file beat defaults', () => {
    const c = loadConfig(
      { temporal: { address: 'flag:3' } },
      { VMSNAP_TEMPORAL_ADDRESS: 'env:2', VMSNAP_CEPH_ID: 'env-id' },
      file,
    );
    expect(c.temporal.address).toBe('flag:3');
    expect(c.ceph.id).toBe('env-id');
    expect(c.temporal.namespace).toBe('from-file');
    expect(c.host).toBe('file-host');
    expect(c.imagePool).toBe('images');
  });

  it('explains what is wrong', () => {
    expect(() => loadConfig({ temporal: { address: 'no port' } }, {}, undefined)).toThrow(ConfigError);
    expect(() => loadConfig({ temporal: { address: 'no port' } }, {}, undefined)).toThrow(/temporal.address must be host:port/);
    expect(() => loadConfig({}, {}, '/nonexistent/vmsnap.json')).toThrow(/cannot read config file/);
    expect(() => loadConfig({ host: 'a b' }, {}, undefined)).toThrow(/host/);
  });

  it('the metrics endpoint listens on loopback unless told otherwise: an address from the file, the environment or a flag', () => {
    expect(loadConfig({}, {}, undefined).metricsAddress).toBe('127.0.0.1');
    expect(loadConfig({}, { VMSNAP_METRICS_ADDRESS: '0.0.0.0' }, undefined).metricsAddress).toBe('0.0.0.0');
    expect(loadConfig({}, { VMSNAP_METRICS_ADDRESS: '::' }, undefined).metricsAddress).toBe('::');
    expect(loadConfig({ metricsAddress: 'hv-a.example' }, { VMSNAP_METRICS_ADDRESS: '10.0.0.5' }, undefined).metricsAddress).toBe('hv-a.example');
    const withAddress = path.join(mkdtempSync(path.join(os.tmpdir(), 'cfg-')), 'vmsnap.json');
    writeFileSync(withAddress, JSON.stringify({ metricsAddress: '192.0.2.7' }));
    expect(loadConfig({}, {}, withAddress).metricsAddress).toBe('192.0.2.7');
    expect(loadConfig({}, { VMSNAP_METRICS_ADDRESS: 'fe80::1' }, withAddress).metricsAddress).toBe('fe80::1');
    for (const bad of ['10.0.0.5:9464', 'a b', 'http://x']) {
      expect(() => loadConfig({}, { VMSNAP_METRICS_ADDRESS: bad }, undefined)).toThrow(/metricsAddress: must be an IP address or a hostname/);
    }
  });

  it('the log level: info unless VMSNAP_LOG_LEVEL or the file says otherwise; anything else is a configuration error', () => {
    expect(loadConfig({}, {}, undefined).logLevel).toBe('info');
    expect(loadConfig({}, { VMSNAP_LOG_LEVEL: 'warn' }, undefined).logLevel).toBe('warn');
    const withLevel = path.join(mkdtempSync(path.join(os.tmpdir(), 'cfg-')), 'vmsnap.json');
    writeFileSync(withLevel, JSON.stringify({ logLevel: 'debug' }));
    expect(loadConfig({}, {}, withLevel).logLevel).toBe('debug');
    expect(loadConfig({}, { VMSNAP_LOG_LEVEL: 'error' }, withLevel).logLevel).toBe('error');
    for (const bad of ['verbose', 'WARN', 'warning', '']) {
      expect(() => loadConfig({}, { VMSNAP_LOG_LEVEL: bad }, undefined)).toThrow(/invalid configuration: logLevel: must be one of error, warn, info, debug/);
    }
  });

  it('a worker with an invalid VMSNAP_LOG_LEVEL exits 2 before it does anything: its state dir is never made', () => {
    const stateDir = path.join(mkdtempSync(path.join(os.tmpdir(), 'cfg-')), 'state');
    const r = spawnSync(process.execPath, [path.resolve(__dirname, '../../bin/vmsnap.js'), 'worker'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, VMSNAP_LOG_LEVEL: 'verbose', VMSNAP_STATE_DIR: stateDir, VMSNAP_METRICS_PORT: '0' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.stderr).toMatch(/logLevel: must be one of error, warn, info, debug/);
    expect(r.status).toBe(2);
    expect(existsSync(stateDir)).toBe(false);
  });

  it('takes only paths for secrets', () => {
    const c = loadConfig({}, { VMSNAP_CEPH_KEYRING: '/etc/ceph/ceph.client.vmsnap.keyring', VMSNAP_TEMPORAL_API_KEY_FILE: '/run/key' }, undefined);
    expect(c.ceph.keyring).toBe('/etc/ceph/ceph.client.vmsnap.keyring');
    expect(c.temporal.apiKeyPath).toBe('/run/key');
    expect(() => loadConfig({}, {}, undefined)).not.toThrow();
  });
});
