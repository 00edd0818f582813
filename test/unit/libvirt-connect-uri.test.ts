import { describe, expect, it } from 'vitest';
import { resolveEndpoint } from '../../src/libvirt/connect-uri';

describe('resolveEndpoint', () => {
  it('system sockets: read-write and read-only', () => {
    expect(resolveEndpoint({})).toEqual({ socketPath: '/run/libvirt/libvirt-sock', openName: 'qemu:///system' });
    expect(resolveEndpoint({ readOnly: true }).socketPath).toBe('/run/libvirt/libvirt-sock-ro');
  });

  it('a read-only connection dials the -ro socket beside the one ?socket= names', () => {
    const uri = 'qemu:///system?socket=/lab/sock/libvirt-sock';
    expect(resolveEndpoint({ uri })).toEqual({ socketPath: '/lab/sock/libvirt-sock', openName: 'qemu:///system' });
    expect(resolveEndpoint({ uri, readOnly: true }).socketPath).toBe('/lab/sock/libvirt-sock-ro');
    expect(resolveEndpoint({ uri: 'qemu+unix:///system?socket=/r/virtqemud-sock', readOnly: true }).socketPath).toBe('/r/virtqemud-sock-ro');
    // Already read-only, or a name without libvirt's suffix: taken as given.
    expect(resolveEndpoint({ uri: `${uri}-ro`, readOnly: true }).socketPath).toBe('/lab/sock/libvirt-sock-ro');
    expect(resolveEndpoint({ uri: 'qemu:///system?socket=/x/custom', readOnly: true }).socketPath).toBe('/x/custom');
    expect(resolveEndpoint({ uri, socketPath: '/explicit', readOnly: true }).socketPath).toBe('/explicit');
  });

  it('refuses transports other than unix sockets', () => {
    expect(() => resolveEndpoint({ uri: 'qemu+ssh://host/system' })).toThrow(/only unix sockets/);
  });
});
