import type { LibvirtClient } from '../libvirt';
import { parseDomainXml } from '../libvirt';

export interface DiskUser {
  name: string;
  uuid: string;
}

/**
 * `pool/image` (or `pool/namespace/image`) of every RBD disk of every domain defined on this
 * host, with the domains that use it: what "in use here" means to a reaper, and what a host
 * answers when another host's reaper asks before removing a disk it made (workflows/fleet-disks.ts).
 */
export async function definedRbdDisks(lv: LibvirtClient): Promise<Map<string, DiskUser[]>> {
  const out = new Map<string, DiskUser[]>();
  for (const dom of await lv.listDomains({ which: 'defined' })) {
    const xmls = [await lv.getDomainXml(dom, { inactive: true })];
    // A running domain may use a disk its persistent definition no longer names (hot-plug, a redefine).
    if ((await lv.getDomainState(dom)).state !== 'shutoff') xmls.push(await lv.getDomainXml(dom));
    for (const xml of xmls) {
      for (const d of parseDomainXml(xml).disks) {
        if (!d.rbd) continue;
        const users = out.get(rbdSpec(d.rbd)) ?? [];
        if (!users.some((u) => u.uuid === dom.uuid)) out.set(rbdSpec(d.rbd), [...users, { name: dom.name, uuid: dom.uuid }]);
      }
    }
  }
  return out;
}

export function rbdSpec(rbd: { pool: string; namespace?: string; image: string }): string {
  return rbd.namespace ? `${rbd.pool}/${rbd.namespace}/${rbd.image}` : `${rbd.pool}/${rbd.image}`;
}
