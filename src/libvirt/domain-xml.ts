/**
 * Reads what vmsnap needs from a domain's XML (virDomainGetXMLDesc): its disks, with the Ceph
 * RBD pool/image, monitors, ceph.conf and auth of network disks, and whether the QEMU guest
 * agent channel exists (without it, freeze is impossible and libvirt answers error 74).
 */
import { child, children, parseXml, type XmlElement } from './xml-tree';

export interface RbdSource {
  pool: string;
  image: string;
  namespace?: string;
  snapshot?: string;
  hosts: { name: string; port?: number }[];
  configFile?: string;
  authUsername?: string;
  secretUuid?: string;
}

export interface DomainDisk {
  /** Guest device name, e.g. `vda`. */
  target: string;
  bus?: string;
  device: 'disk' | 'cdrom' | 'floppy' | 'lun';
  /** The disk's `type` attribute: `network`, `file`, `block`, `volume`, ... */
  type: string;
  readonly: boolean;
  rbd?: RbdSource;
  sourceFile?: string;
  sourceDev?: string;
}

export interface DomainInfo {
  name: string;
  uuid: string;
  disks: DomainDisk[];
  hasAgentChannel: boolean;
  /** libvirt's view of the agent channel of a running domain: `connected` once qemu-ga opened it. */
  agentChannelState?: 'connected' | 'disconnected';
  /** `<memory>` (the most the VM may use), in KiB; absent when the XML has none. */
  memoryKiB?: number;
}

const AGENT_CHANNEL = 'org.qemu.guest_agent.0';
const DEVICES = new Set(['disk', 'cdrom', 'floppy', 'lun']);

export function parseDomainXml(xml: string): DomainInfo {
  const domain = parseXml(xml);
  if (domain.name !== 'domain') throw new Error(`expected <domain>, got <${domain.name}>`);
  const devices = child(domain, 'devices');
  const agent = children(devices, 'channel')
    .map((c) => child(c, 'target'))
    .find((t) => t?.attrs.name === AGENT_CHANNEL);
  const state = agent?.attrs.state;
  return {
    name: child(domain, 'name')?.text.trim() ?? '',
    uuid: child(domain, 'uuid')?.text.trim().toLowerCase() ?? '',
    disks: children(devices, 'disk').map(readDisk),
    hasAgentChannel: agent !== undefined,
    ...memoryOf(child(domain, 'memory')),
    ...(state === 'connected' || state === 'disconnected' ? { agentChannelState: state } : {}),
  };
}

/** libvirt's memory units (virScaleInteger): bytes, or powers of 1000 or 1024 (K, KiB, M, …). */
const SCALE: Record<string, number> = { b: 1, bytes: 1, kb: 1e3, k: 1024, kib: 1024, mb: 1e6, m: 1024 ** 2, mib: 1024 ** 2, gb: 1e9, g: 1024 ** 3, gib: 1024 ** 3, tb: 1e12, t: 1024 ** 4, tib: 1024 ** 4 };

function memoryOf(el: XmlElement | undefined): { memoryKiB?: number } {
  const n = Number(el?.text.trim());
  const scale = SCALE[(el?.attrs.unit ?? 'KiB').toLowerCase()];
  return el && Number.isFinite(n) && scale ? { memoryKiB: Math.ceil((n * scale) / 1024) } : {};
}

function readDisk(disk: XmlElement): DomainDisk {
  const target = child(disk, 'target');
  const source = child(disk, 'source');
  const device = disk.attrs.device ?? 'disk';
  const out: DomainDisk = {
    target: target?.attrs.dev ?? '',
    device: (DEVICES.has(device) ? device : 'disk') as DomainDisk['device'],
    type: disk.attrs.type ?? 'file',
    readonly: child(disk, 'readonly') !== undefined,
  };
  if (target?.attrs.bus) out.bus = target.attrs.bus;
  if (source?.attrs.file) out.sourceFile = source.attrs.file;
  if (source?.attrs.dev) out.sourceDev = source.attrs.dev;
  if (disk.attrs.type === 'network' && source?.attrs.protocol === 'rbd') out.rbd = readRbd(disk, source);
  return out;
}

/** `name` is `pool/image` or `pool/namespace/image`, optionally `@snapshot` (older libvirt). */
function readRbd(disk: XmlElement, source: XmlElement): RbdSource {
  const [path, atSnapshot] = (source.attrs.name ?? '').split('@', 2);
  const parts = path.split('/');
  const rbd: RbdSource = {
    pool: parts[0] ?? '',
    image: parts[parts.length - 1] ?? '',
    hosts: children(source, 'host').map((h) => {
      const host: { name: string; port?: number } = { name: h.attrs.name ?? '' };
      if (h.attrs.port !== undefined) host.port = Number(h.attrs.port);
      return host;
    }),
  };
  if (parts.length >= 3) rbd.namespace = parts.slice(1, -1).join('/');
  const snapshot = child(source, 'snapshot')?.attrs.name ?? atSnapshot;
  if (snapshot) rbd.snapshot = snapshot;
  const configFile = child(source, 'config')?.attrs.file;
  if (configFile) rbd.configFile = configFile;
  // <auth> moved from <disk> into <source> in libvirt 3.9; both forms are accepted.
  const auth = child(source, 'auth') ?? child(disk, 'auth');
  if (auth?.attrs.username) rbd.authUsername = auth.attrs.username;
  const secretUuid = child(auth, 'secret')?.attrs.uuid;
  if (secretUuid) rbd.secretUuid = secretUuid;
  return rbd;
}
