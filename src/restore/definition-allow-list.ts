import path from 'node:path';
import { parseXml } from '../libvirt/xml-tree';
import type { XmlElement } from '../libvirt/xml-tree';

/*
 * What `restore --as` may define. The definition comes from image metadata, and whoever can write
 * metadata in the images pool (Glance's pool, in an OpenStack cloud) could have planted it: a
 * worker defines and starts it as root. So the definition vmsnap would define is checked against
 * an allow-list first (pure: the caller reads the XML and the VM's current definition):
 *
 *  - disks: only the restore's own RBD clones (in the VM pools), or an empty cdrom/floppy;
 *  - no host devices: no <hostdev>, <filesystem>, <redirdev>, <smartcard>, <shmem>, <tpm>,
 *    hostdev interfaces, no `dev`/`evdev` host device on any <source>, no interface <script>;
 *  - no hypervisor pass-through: no namespaced element (qemu:commandline) and no xmlns at all;
 *  - host paths only of the VM's own: chardev/log/socket paths under libvirt's directories, the
 *    directories the source VM's current definition on this host uses, or configured ones; boot
 *    files (kernel, initrd, loader, nvram) and the emulator as the source VM has them, or from the
 *    system's own places; an RBD disk's ceph.conf only the worker's own or under /etc/ceph;
 *  - no DOCTYPE, entities, CDATA or processing instructions (a parser that reads the text
 *    differently from libvirt's could hide an element from this check).
 */

export interface DefinitionContext {
  /** `pool/image` (or `pool/ns/image`) of the disks this restore made: the only disks allowed. */
  restoredDisks: ReadonlySet<string>;
  /** What the source VM's current definition on this host uses (empty when it is not defined here). */
  sourceVm: SourceVmPaths;
  /** Directories host paths may also be in (config `restoreHostPaths`). */
  extraDirs?: readonly string[];
  /** The worker's ceph.conf. */
  cephConf?: string;
}

/** libvirt's own directories for a domain's sockets, logs and state. */
const LIBVIRT_DIRS = ['/var/lib/libvirt/', '/var/log/libvirt/', '/run/libvirt/', '/var/run/libvirt/'];
/** Where a distribution keeps firmware and boot files. */
const SYSTEM_BOOT_DIRS = ['/usr/share/', '/usr/lib/', '/var/lib/libvirt/'];
const EMULATOR = /^\/usr\/(bin|libexec)\/qemu-(system-[a-z0-9_]+|kvm)$/;
const HOST_DEVICE_ELEMENTS = new Set(['hostdev', 'filesystem', 'redirdev', 'smartcard', 'shmem', 'tpm', 'script']);
const BOOT_FILES = new Set(['kernel', 'initrd', 'dtb', 'loader', 'nvram']);
/** Attributes that name a host file or socket. */
const PATH_ATTRS = ['path', 'file', 'socket', 'dir', 'template'];

/** The reasons the definition is refused; empty when it may be defined. */
export function refusedDefinition(xml: string, ctx: DefinitionContext): string[] {
  const out: string[] = [];
  if (/<!(?!--)|<\?|\]\]>/.test(xml.replace(/^\s*<\?xml[^>]*\?>/, ''))) out.push('the XML has a DOCTYPE, entity, CDATA or processing instruction');
  let domain: XmlElement;
  try {
    domain = parseXml(xml);
  } catch (err) {
    return [...out, `not XML: ${(err as Error).message}`];
  }
  if (domain.name !== 'domain') return [...out, `root element is <${domain.name}>, not <domain>`];
  const dirs = [...LIBVIRT_DIRS, ...ctx.sourceVm.dirs, ...(ctx.extraDirs ?? []).map((d) => (d.endsWith('/') ? d : `${d}/`))];

  const walk = (el: XmlElement, trail: string[]): void => {
    const where = [...trail, el.name].join('/');
    if (el.name.includes(':')) out.push(`<${el.name}> (hypervisor pass-through) at ${where}`);
    for (const a of Object.keys(el.attrs)) if (a === 'xmlns' || a.startsWith('xmlns:')) out.push(`namespace declaration ${a} at ${where}`);
    if (HOST_DEVICE_ELEMENTS.has(el.name)) out.push(`<${el.name}> (host device or host script) at ${where}`);
    if (el.name === 'interface' && ['hostdev', 'vdpa'].includes(el.attrs.type ?? '')) out.push(`<interface type='${el.attrs.type}'> (host device) at ${where}`);
    if (el.name === 'disk') checkDisk(el, where, ctx, out);
    if (el.name === 'source') {
      for (const a of ['dev', 'evdev']) if (el.attrs[a] !== undefined) out.push(`host device ${el.attrs[a]} at ${where}`);
    }
    if (el.name === 'emulator') {
      const p = el.text.trim();
      if (!EMULATOR.test(p) && !ctx.sourceVm.files.has(p)) out.push(`emulator ${p} is neither the source VM's nor a system QEMU`);
    }
    if (BOOT_FILES.has(el.name) && trail[trail.length - 1] === 'os' && el.text.trim()) {
      const p = el.text.trim();
      if (!ctx.sourceVm.files.has(p) && !under(p, SYSTEM_BOOT_DIRS)) out.push(`boot file ${p} (<${el.name}>) is not the source VM's own`);
    }
    for (const a of PATH_ATTRS) {
      const p = el.attrs[a];
      if (p === undefined || (el.name === 'config' && a === 'file')) continue;
      if (!under(p, dirs) && !(el.name === 'nvram' && under(p, SYSTEM_BOOT_DIRS))) out.push(`host path ${p} (${a} of <${el.name}>) is outside the VM's own directories`);
    }
    for (const c of el.children) walk(c, [...trail, el.name]);
  };
  walk(domain, []);
  return out;
}

function checkDisk(disk: XmlElement, where: string, ctx: DefinitionContext, out: string[]): void {
  const device = disk.attrs.device ?? 'disk';
  const source = disk.children.find((c) => c.name === 'source');
  if ((device === 'cdrom' || device === 'floppy') && !source) return;
  if (disk.attrs.type !== 'network' || source?.attrs.protocol !== 'rbd') {
    out.push(`${device} of type '${disk.attrs.type ?? 'file'}' at ${where}: only the restore's own RBD disks may be defined`);
    return;
  }
  const name = source.attrs.name ?? '';
  if (!ctx.restoredDisks.has(name)) out.push(`RBD disk ${name} at ${where} is not one this restore made`);
  for (const c of disk.children) {
    if (c.name === 'backingStore' && c.children.length) out.push(`<backingStore> at ${where}: a restored disk has no host backing file`);
  }
  const conf = source.children.find((c) => c.name === 'config')?.attrs.file;
  if (conf !== undefined && conf !== ctx.cephConf && !under(conf, ['/etc/ceph/'])) out.push(`ceph config ${conf} at ${where} is neither the worker's nor under /etc/ceph`);
}

/** An absolute, normalised path inside one of `dirs` (each ending in '/'). */
function under(p: string, dirs: readonly string[]): boolean {
  if (!p.startsWith('/') || path.posix.normalize(p) !== p || p.includes('\0')) return false;
  return dirs.some((d) => p.startsWith(d) && p.length > d.length);
}

/** The source VM's own host paths: its boot files and emulator, and the directories of its sockets and logs. */
export interface SourceVmPaths {
  files: ReadonlySet<string>;
  /** Each ending in '/'; never '/' itself. */
  dirs: ReadonlySet<string>;
}

export const NO_SOURCE_VM: SourceVmPaths = { files: new Set(), dirs: new Set() };

/** What a definition libvirt holds for the source VM (trusted: libvirt's, not the record's) uses. */
export function sourceVmPathsOf(xml: string): SourceVmPaths {
  const files = new Set<string>();
  const dirs = new Set<string>();
  const walk = (el: XmlElement, parent: string): void => {
    if ((el.name === 'emulator' || (parent === 'os' && BOOT_FILES.has(el.name))) && el.text.trim()) files.add(el.text.trim());
    for (const a of PATH_ATTRS) {
      const p = el.attrs[a];
      if (el.name === 'config' || !p?.startsWith('/')) continue;
      const dir = path.posix.dirname(path.posix.normalize(p));
      if (dir !== '/') dirs.add(`${dir}/`);
    }
    for (const c of el.children) walk(c, el.name);
  };
  walk(parseXml(xml), '');
  return { files, dirs };
}
