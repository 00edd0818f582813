import { mkdtempSync, writeFileSync } from 'node:fs';
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

  it('takes only paths for secrets', () => {
    const c = loadConfig({}, { VMSNAP_CEPH_KEYRING: '/etc/ceph/ceph.client.vmsnap.keyring', VMSNAP_TEMPORAL_API_KEY_FILE: '/run/key' }, undefined);
    expect(c.ceph.keyring).toBe('/etc/ceph/ceph.client.vmsnap.keyring');
    expect(c.temporal.apiKeyPath).toBe('/run/key');
    expect(() => loadConfig({}, {}, undefined)).not.toThrow();
  });
});
