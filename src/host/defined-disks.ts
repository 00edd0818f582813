import type { LibvirtClient } from '../libvirt';
import { parseDomainXml } from '../libvirt';

/**
 * `pool/image` (or `pool/namespace/image`) of every RBD disk of every domain defined on this
 * host, with the domain's name: what "in use here" means to a reaper, and what a host answers
 * when another host's reaper asks before removing a disk it made (workflows/fleet-disks.ts).
 */
export async function definedRbdDisks(lv: LibvirtClient): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const dom of await lv.listDomains({ which: 'defined' })) {
    const xmls = [await lv.getDomainXml(dom, { inactive: true })];
    // A running domain may use a disk its persistent definition no longer names (hot-plug, a redefine).
    if ((await lv.getDomainState(dom)).state !== 'shutoff') xmls.push(await lv.getDomainXml(dom));
    for (const xml of xmls) {
      for (const d of parseDomainXml(xml).disks) {
        if (d.rbd && !out.has(rbdSpec(d.rbd))) out.set(rbdSpec(d.rbd), dom.name);
      }
    }
  }
  return out;
}

export function rbdSpec(rbd: { pool: string; namespace?: string; image: string }): string {
  return rbd.namespace ? `${rbd.pool}/${rbd.namespace}/${rbd.image}` : `${rbd.pool}/${rbd.image}`;
}
