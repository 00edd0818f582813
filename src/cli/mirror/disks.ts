import { parseDomainXml } from '../../libvirt';
import { DOMAIN_NAME, DOMAIN_UUID } from '../../model/input';
import { CliError, Exit } from '../exit-codes';
import { connectLibvirt } from '../libvirt-session';

/** One RBD disk of a domain, as `vmsnap mirror` acts on it. */
export interface MirrorDisk {
  target: string;
  pool: string;
  namespace: string;
  image: string;
}

export const diskSpec = (d: MirrorDisk): string => `${d.pool}/${d.namespace ? `${d.namespace}/` : ''}${d.image}`;
export const poolSpec = (d: MirrorDisk): string => (d.namespace ? `${d.pool}/${d.namespace}` : d.pool);

/**
 * The RBD disks of `domain` as this host's libvirtd defines it (running or not). An invalid name, an
 * unknown domain or one without an RBD disk is the caller's input: exit 2, nothing contacted but libvirt.
 */
export async function domainRbdDisks(uri: string, domain: string): Promise<{ name: string; disks: MirrorDisk[] }> {
  if (!DOMAIN_NAME.test(domain) && !DOMAIN_UUID.test(domain)) throw new CliError(`invalid domain "${domain}"`, Exit.badInput);
  const lv = await connectLibvirt(uri);
  try {
    const dom = await lv.lookupDomain(domain).catch((err: Error) => {
      throw new CliError(`no domain ${domain} on this host (${uri}): ${err.message}`, Exit.badInput, 'DomainNotFound');
    });
    const info = parseDomainXml(await lv.getDomainXml(dom));
    const disks = info.disks
      .filter((d) => d.device === 'disk' && d.rbd)
      .map((d) => ({ target: d.target, pool: d.rbd!.pool, namespace: d.rbd!.namespace ?? '', image: d.rbd!.image }));
    if (!disks.length) throw new CliError(`${dom.name} has no RBD disk: nothing to mirror`, Exit.badInput, 'NoRbdDisk');
    return { name: dom.name, disks };
  } finally {
    await lv.close();
  }
}
