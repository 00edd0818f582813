/**
 * Domain references as libvirt's RPC passes them (`remote_nonnull_domain`: name, 16-byte UUID,
 * id). libvirtd looks a domain up by UUID, so a ref stays valid across restarts of libvirtd.
 */
import type { XdrReader, XdrWriter } from './xdr';

export interface DomainRef {
  name: string;
  /** 8-4-4-4-12 lowercase hex. */
  uuid: string;
  /** -1 when the domain is not running. */
  id: number;
}

const UUID_RE = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

export function uuidToBytes(uuid: string): Buffer {
  if (!isUuid(uuid)) throw new TypeError(`not a UUID: ${JSON.stringify(uuid)}`);
  return Buffer.from(uuid.replace(/-/g, ''), 'hex');
}

export function uuidFromBytes(bytes: Buffer): string {
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function writeDomain(w: XdrWriter, dom: DomainRef): void {
  w.string(dom.name).fixedOpaque(uuidToBytes(dom.uuid)).int(dom.id);
}

export function readDomain(r: XdrReader): DomainRef {
  const name = r.string();
  const uuid = uuidFromBytes(r.fixedOpaque(16));
  const id = r.int();
  return { name, uuid, id };
}
