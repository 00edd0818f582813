import { getPoolMirrorMode, listMirrorPeers } from '../../ceph';
import type { IoCtx, MirrorPeerSite, PoolMirrorMode } from '../../ceph';

/*
 * The pool-level side of snapshot-mode mirroring, which vmsnap reads and never changes: the pool
 * (or namespace) mirrors in `image` mode (only the images enabled one by one) and has a peer site.
 * Setting those is a cluster-wide decision an operator makes once (docs/dr.md#setting-it-up).
 */

export interface PoolMirroring {
  /** `pool` or `pool/namespace`. */
  spec: string;
  mode: PoolMirrorMode;
  peers: MirrorPeerSite[];
}

/** rbd_mirror_mode_get + rbd_mirror_peer_site_list of one pool (or namespace). */
export async function readPoolMirroring(io: IoCtx): Promise<PoolMirroring> {
  const spec = io.namespace ? `${io.pool}/${io.namespace}` : io.pool;
  const mode = await getPoolMirrorMode(io);
  return { spec, mode, peers: mode === 'disabled' ? [] : await listMirrorPeers(io) };
}

/** What is missing on a pool, and the Ceph command(s) that set it up. */
export interface PoolProblem {
  problem: string;
  fix: string;
}

/**
 * Why the pool is not ready for `vmsnap mirror enable`, with the Ceph command that fixes it; undefined
 * when it is. A peer that pulls from this side is one whose rbd-mirror registered here (`tx-only`,
 * or `rx-tx` for two-way mirroring); an `rx-only` entry is this side pulling from another.
 */
export function poolRefusal(p: PoolMirroring): PoolProblem | undefined {
  if (p.mode === 'disabled') {
    return { problem: `pool ${p.spec} does not mirror (mirror mode disabled)`, fix: `run \`rbd mirror pool enable ${p.spec} image\` on this cluster and peer it with the DR site (docs/dr.md#setting-it-up)` };
  }
  if (p.mode !== 'image') {
    return {
      problem: `pool ${p.spec} mirrors in '${p.mode}' mode (every journaled image, journal mode); vmsnap mirrors chosen images in snapshot mode and needs 'image' mode`,
      fix: `\`rbd mirror pool enable ${p.spec} image\` (decide for the whole pool first: it changes what the other images do)`,
    };
  }
  if (!p.peers.some(pulls)) {
    const rx = p.peers.filter((x) => x.direction === 'rx-only').map((x) => x.siteName || x.uuid);
    return {
      problem: `pool ${p.spec} has no peer site that pulls from it${rx.length ? ` (only rx-only: ${rx.join(', ')})` : ''}`,
      fix: `\`rbd mirror pool peer bootstrap create --site-name SITE ${p.spec}\` here, \`rbd mirror pool peer bootstrap import --site-name DR-SITE --direction rx-only ${p.spec} TOKEN\` on the DR cluster, and rbd-mirror running there (docs/dr.md#setting-it-up)`,
    };
  }
  return undefined;
}

/** A peer whose rbd-mirror pulls this pool's images: registered here (its mirror uuid known) and not rx-only. */
export function pulls(p: MirrorPeerSite): boolean {
  return p.direction !== 'rx-only' && p.mirrorUuid !== '';
}
