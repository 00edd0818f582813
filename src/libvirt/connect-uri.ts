/**
 * Turns connect options into a unix socket path and the name sent in CONNECT_OPEN, as libvirt's
 * remote driver does for `qemu:///system?socket=...` (the transport part never reaches libvirtd).
 */
import { existsSync } from 'node:fs';

export interface ResolvedEndpoint {
  socketPath: string;
  /** The URI libvirtd's CONNECT_OPEN receives: driver and path, without transport parameters. */
  openName: string;
}

/** libvirt's `mode` URI parameter: which daemon serves a system URI. */
export type DaemonMode = 'auto' | 'legacy' | 'direct';
const MODES: readonly DaemonMode[] = ['auto', 'legacy', 'direct'];

const RUN_DIR = '/run/libvirt';

/** Seam for unit tests: whether a socket path exists. */
export type Exists = (path: string) => boolean;

export function resolveEndpoint(opts: { uri?: string; socketPath?: string; readOnly?: boolean }, exists: Exists = existsSync): ResolvedEndpoint {
  const uri = new URL(opts.uri ?? 'qemu:///system');
  const [driver = '', transport] = uri.protocol.replace(/:$/, '').split('+');
  if (transport !== undefined && transport !== 'unix') {
    throw new TypeError(`unsupported libvirt transport "${transport}" in ${opts.uri} (only unix sockets)`);
  }
  const mode = uri.searchParams.get('mode') ?? 'auto';
  if (!MODES.includes(mode as DaemonMode)) {
    throw new TypeError(`unsupported libvirt mode "${mode}" in ${opts.uri} (auto, legacy or direct)`);
  }
  const openName = `${driver}://${uri.host}${uri.pathname}`;
  const socketPath = opts.socketPath ?? namedSocket(uri, opts.readOnly) ?? systemSocket(driver, mode as DaemonMode, !!opts.readOnly, exists);
  return { socketPath, openName };
}

/**
 * The system socket libvirt's client picks (remote_sockets.c `remoteGetUNIXSocket`): a modular
 * host runs one daemon per driver (`virtqemud` on /run/libvirt/virtqemud-sock), a monolithic one
 * `libvirtd` on /run/libvirt/libvirt-sock. `direct` and `legacy` name one; `auto` (the default)
 * takes the per-driver socket when it exists, else libvirtd's, and libvirtd's when neither exists
 * (Debian 12's build default; the error then names the socket an operator most likely expects).
 * Read-only connections check and dial the `-sock-ro` twin, as libvirt does.
 */
function systemSocket(driver: string, mode: DaemonMode, readOnly: boolean, exists: Exists): string {
  const suffix = readOnly ? 'sock-ro' : 'sock';
  const direct = `${RUN_DIR}/virt${driver}d-${suffix}`;
  const legacy = `${RUN_DIR}/libvirt-${suffix}`;
  if (mode === 'direct') return direct;
  if (mode === 'legacy') return legacy;
  if (exists(direct)) return direct;
  return legacy;
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
