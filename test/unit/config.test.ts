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

  it('takes only paths for secrets', () => {
    const c = loadConfig({}, { VMSNAP_CEPH_KEYRING: '/etc/ceph/ceph.client.vmsnap.keyring', VMSNAP_TEMPORAL_API_KEY_FILE: '/run/key' }, undefined);
    expect(c.ceph.keyring).toBe('/etc/ceph/ceph.client.vmsnap.keyring');
    expect(c.temporal.apiKeyPath).toBe('/run/key');
    expect(() => loadConfig({}, {}, undefined)).not.toThrow();
  });
});
