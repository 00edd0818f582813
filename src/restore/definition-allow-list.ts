import { parseXml } from '../libvirt/xml-tree';
import type { XmlElement } from '../libvirt/xml-tree';

/*
 * What `restore --as` may define: the recorded definition after its rewrite (new name, UUID,
 * disks, chardev paths), checked before anything is defined. Allowed: RBD disks that are this
 * restore's own clones in a VM pool, read-only RBD or file disks the source VM itself had, and
 * host paths (kernel, initrd, loader, nvram, emulator, console logs, sockets) the source VM's own
 * definition names — or, for character devices, the same file renamed for the new VM. Refused,
 * even when the source had them: anything that hands the guest a host device or host directory
 * (<hostdev>, block/dir/volume/LUN disks, writable file disks, <filesystem>, USB/smartcard
 * redirection, passthrough input/TPM, host-device chardevs, hostdev/vdpa interfaces, shared
 * memory) and QEMU pass-through (<qemu:commandline>, <qemu:override>). Pure.
 */

export interface AllowListContext {
  /** `pool/image` (or `pool/namespace/image`) of every disk this restore made. */
  clones: ReadonlySet<string>;
  /** The images pool: a new VM never writes there. */
  imagePool: string;
  /** The new VM's name: a chardev path of the source renamed `<dir>/<name>.<file>` is its own. */
  name: string;
  /** Host paths the restore itself put in (dr-restore: the DR cluster's ceph.conf of each disk). */
  ownPaths?: ReadonlySet<string>;
}

const HOST_DEVICE_ELEMENTS: Record<string, string> = {
  hostdev: 'a host device (<hostdev>)',
  filesystem: 'a host directory (<filesystem>)',
  redirdev: 'USB redirection (<redirdev>)',
  smartcard: 'a host smartcard (<smartcard>)',
  shmem: 'host shared memory (<shmem>)',
};
const PASS_THROUGH = new Set(['qemu:commandline', 'qemu:override', 'qemu:capabilities']);
const PATH_TEXT = new Set(['kernel', 'initrd', 'dtb', 'loader', 'nvram', 'emulator']);
const PATH_ATTRS = ['file', 'path', 'dir', 'dev'];

/** Why the definition must not be defined, or null when every element is allowed. */
export function definitionRefusal(finalXml: string, recordedXml: string, ctx: AllowListContext): string | null {
  const dom = parseXml(finalXml);
  if (dom.name !== 'domain') return `not a domain definition (<${dom.name}>)`;
  for (const el of dom.children) if (PASS_THROUGH.has(el.name)) return `QEMU pass-through (<${el.name}>)`;
  const devices = dom.children.find((c) => c.name === 'devices');
  const recorded = parseXml(recordedXml);
  const recordedRbd = new Set(disksOf(recorded).flatMap((d) => (rbdName(d) ? [rbdName(d)!] : [])));
  for (const el of devices?.children ?? []) {
    const why = HOST_DEVICE_ELEMENTS[el.name] ?? deviceRefusal(el, ctx, recordedRbd);
    if (why) return why;
  }
  const own = hostPaths(recorded);
  for (const p of hostPaths(dom)) {
    if (own.has(p) || ctx.ownPaths?.has(p) || isRenamedChardev(p, own, ctx.name)) continue;
    return `host path ${p} is not the source VM's own`;
  }
  return null;
}

function deviceRefusal(el: XmlElement, ctx: AllowListContext, recordedRbd: ReadonlySet<string>): string | null {
  const type = el.attrs.type ?? '';
  switch (el.name) {
    case 'disk':
      return diskRefusal(el, ctx, recordedRbd);
    case 'interface':
      return type === 'hostdev' || type === 'vdpa' ? `a host network device (<interface type='${type}'>)` : null;
    case 'input':
      return type === 'passthrough' || type === 'evdev' ? `a host input device (<input type='${type}'>)` : null;
    case 'tpm':
      return el.attrs.model !== undefined && el.children.some((b) => b.name === 'backend' && b.attrs.type === 'passthrough') ? 'a host TPM (passthrough)' : null;
    case 'serial':
    case 'parallel':
    case 'console':
    case 'channel':
      return type === 'dev' ? `a host character device (<${el.name} type='dev'>)` : null;
    default:
      return null;
  }
}

function diskRefusal(disk: XmlElement, ctx: AllowListContext, recordedRbd: ReadonlySet<string>): string | null {
  const target = disk.children.find((c) => c.name === 'target')?.attrs.dev ?? '?';
  const type = disk.attrs.type ?? 'file';
  const device = disk.attrs.device ?? 'disk';
  const readonly = device === 'cdrom' || device === 'floppy' || disk.children.some((c) => c.name === 'readonly');
  if (device === 'lun') return `disk ${target} passes a host LUN through`;
  if (type === 'network') {
    const name = rbdName(disk);
    if (!name) return `disk ${target} is a non-RBD network disk`;
    if (name.split('/')[0] === ctx.imagePool) return `disk ${target} is in the images pool (${name})`;
    if (ctx.clones.has(name)) return null;
    if (readonly && recordedRbd.has(name)) return null;
    return `disk ${target} (${name}) is neither this restore's clone nor a read-only disk of the source VM`;
  }
  if (type === 'file') return readonly ? null : `disk ${target} is a writable host file`;
  return `disk ${target} is type='${type}' (a host device, directory or volume)`;
}

function disksOf(dom: XmlElement): XmlElement[] {
  return dom.children.find((c) => c.name === 'devices')?.children.filter((c) => c.name === 'disk') ?? [];
}

function rbdName(disk: XmlElement): string | undefined {
  const src = disk.children.find((c) => c.name === 'source');
  return src?.attrs.protocol === 'rbd' ? (src.attrs.name ?? '').split('@')[0] : undefined;
}

/** Every absolute host path the definition names (element texts and path-like attributes). */
function hostPaths(root: XmlElement): Set<string> {
  const out = new Set<string>();
  const walk = (el: XmlElement) => {
    if (PATH_TEXT.has(el.name) && el.text.trim().startsWith('/')) out.add(el.text.trim());
    for (const a of PATH_ATTRS) {
      const v = el.attrs[a];
      if (v?.startsWith('/')) out.add(v);
    }
    el.children.forEach(walk);
  };
  walk(root);
  return out;
}

function isRenamedChardev(p: string, own: ReadonlySet<string>, name: string): boolean {
  const i = p.lastIndexOf('/');
  const dir = p.slice(0, i + 1);
  const file = p.slice(i + 1);
  if (!file.startsWith(`${name}.`)) return false;
  return own.has(`${dir}${file.slice(name.length + 1)}`);
}
