/**
 * The bench's own long-lived connections to the lab: one libvirt client, one rados connection
 * (admin), an ioctx per pool, and per guest its domain ref and RBD data disks. Contenders that are
 * "connections already open" use these; the others open their own.
 */
import { isBusy, openImage, RadosCluster, removeImage } from '../src/ceph';
import type { Image, IoCtx } from '../src/ceph';
import { loadLabEnv } from '../support/lab/env';
import type { LabEnv } from '../support/lab/env';
import { LibvirtClient, parseDomainXml } from '../src/libvirt';
import type { DomainRef } from '../src/libvirt';

export interface GuestDisk {
  target: string;
  pool: string;
  image: string;
}

export interface Guest {
  name: string;
  dom: DomainRef;
  disks: GuestDisk[];
  /** The guest's disk images, opened once (the floor contender snapshots through these). */
  images: Image[];
}

export interface LabContext {
  env: LabEnv;
  libvirt: LibvirtClient;
  rados: RadosCluster;
  ioctx(pool: string): Promise<IoCtx>;
  guest(name: string): Promise<Guest>;
  /** `-c conf --id admin --keyring ...` for the rbd CLI. */
  rbdArgs: string[];
  virshArgs: string[];
  close(): Promise<void>;
}

/** Agent timeout for freeze/thaw, as vmsnap's default input sets it (agentTimeoutSec 5). */
export const AGENT_TIMEOUT_SEC = 5;

export async function openLabContext(): Promise<LabContext> {
  const env = loadLabEnv();
  if (!env.libvirt || !env.guests) throw new Error('the lab has no libvirt/guests: bash lab/lab.sh up');
  const libvirt = await LibvirtClient.connect({ uri: env.libvirt.uri });
  const rados = await RadosCluster.connect({ conf: env.ceph.conf, id: env.ceph.adminId, keyring: env.ceph.adminKeyring, connectTimeoutSec: 10 });
  const pools = new Map<string, Promise<IoCtx>>();
  const guests = new Map<string, Promise<Guest>>();
  const ioctx = (pool: string): Promise<IoCtx> => {
    let io = pools.get(pool);
    if (!io) pools.set(pool, (io = rados.openIoCtx(pool)));
    return io;
  };
  const loadGuest = async (name: string): Promise<Guest> => {
    const dom = await libvirt.lookupDomainByName(name);
    const info = parseDomainXml(await libvirt.getDomainXml(dom));
    const disks = info.disks.filter((d) => d.rbd).map((d) => ({ target: d.target, pool: d.rbd!.pool, image: d.rbd!.image }));
    const images = await Promise.all(disks.map(async (d) => openImage(await ioctx(d.pool), d.image)));
    await libvirt.setAgentResponseTimeout(dom, AGENT_TIMEOUT_SEC);
    return { name, dom, disks, images };
  };
  return {
    env,
    libvirt,
    rados,
    ioctx,
    guest(name) {
      let g = guests.get(name);
      if (!g) guests.set(name, (g = loadGuest(name)));
      return g;
    },
    rbdArgs: ['-c', env.ceph.conf, '--id', env.ceph.adminId, '--keyring', env.ceph.adminKeyring],
    virshArgs: ['-q', '-c', env.libvirt.uri],
    async close() {
      for (const g of guests.values()) {
        const guest = await g.catch(() => undefined);
        for (const img of guest?.images ?? []) await img.close().catch(() => undefined);
      }
      for (const io of pools.values()) await (await io).close().catch(() => undefined);
      await rados.shutdown().catch(() => undefined);
      await libvirt.close().catch(() => undefined);
    },
  };
}

/** Thaws the guest and confirms with guest-fsfreeze-status; used in every finally block. */
export async function ensureThawed(ctx: LabContext, guest: Guest): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await ctx.libvirt.fsThaw(guest.dom, undefined, { timeoutMs: AGENT_TIMEOUT_SEC * 1000 + 2000 });
      if ((await ctx.libvirt.fsFreezeStatus(guest.dom, AGENT_TIMEOUT_SEC)) === 'thawed') return;
    } catch {
      // retry below
    }
    await new Promise((r) => setTimeout(r, 300 * (attempt + 1)));
  }
  throw new Error(`could not confirm ${guest.name} thawed after 5 attempts`);
}

/** Removes a snapshot if it exists (unprotecting first); ENOENT is fine. */
export async function removeSnapIfAny(image: Image, snap: string): Promise<void> {
  if (!(await image.snapExists(snap))) return;
  if (await image.isSnapProtected(snap)) await image.unprotectSnap(snap);
  await image.removeSnap(snap);
}

/**
 * rbd_remove, retried while it fails EBUSY: right after a handle on the image was closed (or a
 * worker's activity closed it) its watch can linger briefly and the remove is refused.
 */
export async function removeImageRetrying(io: IoCtx, name: string, attempts = 10): Promise<void> {
  for (let i = 1; ; i++) {
    try {
      await removeImage(io, name);
      return;
    } catch (err) {
      if (!isBusy(err) || i >= attempts) throw err;
      await new Promise((r) => setTimeout(r, 500 * i));
    }
  }
}
