import { describe, expect, it } from 'vitest';
import { resolveEndpoint } from '../../src/libvirt/connect-uri';

/** Sockets that "exist" for one case, so the choice does not depend on this machine's /run. */
const only = (...paths: string[]) => (p: string) => paths.includes(p);
const none = only();

describe('resolveEndpoint', () => {
  it('system sockets: read-write and read-only', () => {
    expect(resolveEndpoint({}, none)).toEqual({ socketPath: '/run/libvirt/libvirt-sock', openName: 'qemu:///system' });
    expect(resolveEndpoint({ readOnly: true }, none).socketPath).toBe('/run/libvirt/libvirt-sock-ro');
  });

  it('modular vs monolithic daemons, as remote_sockets.c picks them (mode auto)', () => {
    // Modular host (EL9, Fedora, newer Debian): virtqemud serves qemu:///system.
    const modular = only('/run/libvirt/virtqemud-sock', '/run/libvirt/virtqemud-sock-ro', '/run/libvirt/libvirt-sock');
    expect(resolveEndpoint({}, modular).socketPath).toBe('/run/libvirt/virtqemud-sock');
    expect(resolveEndpoint({ readOnly: true }, modular).socketPath).toBe('/run/libvirt/virtqemud-sock-ro');
    // Monolithic host (Debian 12): libvirtd only.
    const monolithic = only('/run/libvirt/libvirt-sock', '/run/libvirt/libvirt-sock-ro');
    expect(resolveEndpoint({}, monolithic).socketPath).toBe('/run/libvirt/libvirt-sock');
    expect(resolveEndpoint({ readOnly: true }, monolithic).socketPath).toBe('/run/libvirt/libvirt-sock-ro');
    // The per-driver socket follows the URI's driver.
    expect(resolveEndpoint({ uri: 'lxc:///system' }, only('/run/libvirt/virtlxcd-sock')).socketPath).toBe('/run/libvirt/virtlxcd-sock');
    // Read-only checks the -ro twin, as libvirt does: a modular rw socket alone does not pick it for ro.
    expect(resolveEndpoint({ readOnly: true }, only('/run/libvirt/virtqemud-sock')).socketPath).toBe('/run/libvirt/libvirt-sock-ro');
  });

  it('?mode=direct / ?mode=legacy force the daemon; anything else is refused', () => {
    expect(resolveEndpoint({ uri: 'qemu:///system?mode=direct' }, none).socketPath).toBe('/run/libvirt/virtqemud-sock');
    expect(resolveEndpoint({ uri: 'qemu:///system?mode=legacy' }, only('/run/libvirt/virtqemud-sock')).socketPath).toBe('/run/libvirt/libvirt-sock');
    expect(resolveEndpoint({ uri: 'qemu:///system?mode=direct' }, none).openName).toBe('qemu:///system');
    expect(() => resolveEndpoint({ uri: 'qemu:///system?mode=modular' }, none)).toThrow(/unsupported libvirt mode "modular"/);
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
    // ?socket= wins over the daemon choice.
    expect(resolveEndpoint({ uri: `${uri}&mode=direct` }, only('/run/libvirt/virtqemud-sock')).socketPath).toBe('/lab/sock/libvirt-sock');
  });

  it('refuses transports other than unix sockets', () => {
    expect(() => resolveEndpoint({ uri: 'qemu+ssh://host/system' })).toThrow(/only unix sockets/);
  });
});
