/**
 * Turns connect options into a unix socket path and the name sent in CONNECT_OPEN, as libvirt's
 * remote driver does for `qemu:///system?socket=...` (the transport part never reaches libvirtd).
 */

export interface ResolvedEndpoint {
  socketPath: string;
  /** The URI libvirtd's CONNECT_OPEN receives: driver and path, without transport parameters. */
  openName: string;
}

const SYSTEM_SOCKET = '/run/libvirt/libvirt-sock';
const SYSTEM_SOCKET_RO = '/run/libvirt/libvirt-sock-ro';

export function resolveEndpoint(opts: { uri?: string; socketPath?: string; readOnly?: boolean }): ResolvedEndpoint {
  const uri = new URL(opts.uri ?? 'qemu:///system');
  const [driver, transport] = uri.protocol.replace(/:$/, '').split('+');
  if (transport !== undefined && transport !== 'unix') {
    throw new TypeError(`unsupported libvirt transport "${transport}" in ${opts.uri} (only unix sockets)`);
  }
  const openName = `${driver}://${uri.host}${uri.pathname}`;
  const socketPath = opts.socketPath ?? namedSocket(uri, opts.readOnly) ?? (opts.readOnly ? SYSTEM_SOCKET_RO : SYSTEM_SOCKET);
  return { socketPath, openName };
}

/**
 * `?socket=` names libvirtd's read-write socket; libvirtd puts its read-only one beside it as
 * `libvirt-sock-ro` (virtqemud: `virtqemud-sock-ro`), so a read-only connection dials that one.
 */
function namedSocket(uri: URL, readOnly: boolean | undefined): string | undefined {
  const socket = uri.searchParams.get('socket') ?? undefined;
  if (!socket || !readOnly || socket.endsWith('-ro')) return socket;
  return /-sock$/.test(socket) ? `${socket}-ro` : socket;
}
