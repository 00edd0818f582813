import { RadosCluster } from '../../ceph';
import type { Config } from '../../config';
import { withDrSite } from '../mirror/dr-site';
import { readDrImage, readImageMirroring } from '../mirror/image';
import type { DrImageView, ImageMirroring } from '../mirror/image';
import { poolRefusal, pulls, readPoolMirroring } from '../mirror/pool';
import type { PoolMirroring } from '../mirror/pool';
import { fail, messageOf, ok, warn, within } from './check';
import type { CheckResult } from './check';
import type { DomainRbdDisk } from './libvirt-checks';

/*
 * With a DR site configured (drCeph, docs/dr.md): it answers; each checked disk's pool mirrors in
 * image mode with a peer that pulls from it; the DR site's rbd-mirror is alive (what it last
 * reported for the mirrored images is `up`: librbd marks a status `down` once the daemon that
 * wrote it no longer watches the pool, ~30 s after it died); and each disk mirrors in snapshot
 * mode, primary here, with a copy there that its rbd-mirror replays. Nothing when no DR site is
 * configured.
 */

const spec = (d: DomainRbdDisk) => (d.namespace ? `${d.pool}/${d.namespace}` : d.pool);

interface Seen {
  disk: DomainRbdDisk;
  local: ImageMirroring | { error: string };
  dr?: DrImageView | { error: string };
}

export async function checkDr(config: Config, disks: DomainRbdDisk[]): Promise<CheckResult[]> {
  if (!config.drCeph) return [];
  const out: CheckResult[] = [];
  const { conf, id, keyring } = config.ceph;
  let cluster: RadosCluster;
  try {
    cluster = await within(20_000, 'rados connect', RadosCluster.connect({ conf, id, keyring, connectTimeoutSec: 10 }));
  } catch {
    return []; // the ceph line already says so
  }
  const seen: Seen[] = [];
  try {
    const pools = new Map<string, PoolMirroring | { error: string }>();
    for (const d of disks) {
      if (pools.has(spec(d))) continue;
      const read = await within(10_000, `mirroring of pool ${spec(d)}`, (async () => {
        const io = await cluster.openIoCtx(d.pool, d.namespace);
        try {
          return await readPoolMirroring(io);
        } finally {
          await io.close().catch(() => undefined);
        }
      })()).catch((err: unknown) => ({ error: messageOf(err) }));
      pools.set(spec(d), read);
    }
    for (const [name, p] of pools) out.push(poolLine(name, p));
    for (const d of disks) {
      const local = await within(10_000, `mirroring of ${d.pool}/${d.image}`, (async () => {
        const io = await cluster.openIoCtx(d.pool, d.namespace);
        try {
          return await readImageMirroring(io, d.image);
        } finally {
          await io.close().catch(() => undefined);
        }
      })()).catch((err: unknown) => ({ error: messageOf(err) }));
      seen.push({ disk: d, local });
    }
  } finally {
    await cluster.shutdown().catch(() => undefined);
  }
  const mirrored = seen.filter((s) => !('error' in s.local) && s.local.state === 'enabled');
  const site = await withDrSite(config, async (dr) => {
    for (const s of mirrored) {
      s.dr = await within(10_000, `the DR copy of ${s.disk.image}`, dr.open(s.disk.pool, s.disk.namespace).then((io) => readDrImage(io, s.disk.image))).catch((err: unknown) => ({ error: messageOf(err) }));
    }
    return dr.fsid;
  });
  if (site && typeof site === 'object') {
    out.unshift(fail('dr site', site.error, `check the DR cluster's monitors and drCeph (conf ${config.drCeph.conf}, id ${config.drCeph.id})`, true));
  } else {
    out.unshift(ok('dr site', `reachable as client.${config.drCeph.id} (fsid ${site})`));
    out.push(daemonLine(mirrored));
  }
  for (const s of seen) out.push(imageLine(s, !!site && typeof site !== 'object'));
  return out;
}

function poolLine(name: string, p: PoolMirroring | { error: string }): CheckResult {
  const line = `dr pool ${name}`;
  if ('error' in p) return fail(line, `cannot read its mirroring: ${p.error}`, 'check the key\'s caps on the pool (profile rbd)');
  const why = poolRefusal(p);
  if (why) return fail(line, why.problem, why.fix);
  const peers = p.peers.filter(pulls).map((x) => `${x.siteName || x.uuid} (${x.direction})`);
  return ok(line, `mirrors in image mode; peer ${peers.join(', ')}`);
}

function daemonLine(mirrored: Seen[]): CheckResult {
  const name = 'dr rbd-mirror';
  const statuses = mirrored.flatMap((s) => (s.dr && !('error' in s.dr) && s.dr.daemon ? [{ image: s.disk.image, ...s.dr.daemon }] : []));
  if (!statuses.length) {
    return warn(name, 'no mirrored image among the checked disks reports a status from the DR site\'s rbd-mirror, so its health cannot be read here', 'vmsnap mirror enable DOMAIN for a VM that should have DR points, then doctor again');
  }
  const down = statuses.filter((s) => s.status.startsWith('down+'));
  if (down.length) {
    return fail(name, `not running: its last status of ${down.map((s) => `${s.image} is ${s.status}`).join(', ')} (down: the daemon that wrote it is gone)`, 'start rbd-mirror on the DR site (systemctl start ceph-rbd-mirror@ID); its log says why it stopped');
  }
  const bad = statuses.filter((s) => s.status !== 'up+replaying' && s.status !== 'up+syncing' && s.status !== 'up+starting_replay');
  if (bad.length) return fail(name, `running, but ${bad.map((s) => `${s.image}: ${s.status}${s.description ? ` (${s.description})` : ''}`).join(', ')}`, 'the DR site\'s rbd-mirror log; vmsnap mirror status DOMAIN');
  return ok(name, `running: ${statuses.length} image(s) ${[...new Set(statuses.map((s) => s.status))].join(', ')}`);
}

function imageLine(s: Seen, drReached: boolean): CheckResult {
  const d = s.disk;
  const name = `dr domain ${d.domain} ${d.target}`;
  const where = `${d.pool}/${d.namespace ? `${d.namespace}/` : ''}${d.image}`;
  if ('error' in s.local) return fail(name, `${where}: cannot read its mirroring: ${s.local.error}`, 'check the key\'s caps on the pool');
  const m = s.local;
  if (m.state !== 'enabled') return warn(name, `${where} does not mirror: DR runs of ${d.domain} are refused (MirrorNotEnabled)`, `vmsnap mirror enable ${d.domain}`);
  if (m.mode !== 'snapshot' || !m.primary) return fail(name, `${where} mirrors ${m.mode !== 'snapshot' ? `in ${m.mode} mode` : 'but is not primary here'}: DR runs refuse it`, `vmsnap mirror status ${d.domain}`);
  if (!drReached) return warn(name, `${where} mirrors in snapshot mode, primary here; the DR site was not reached`, 'see the dr site line');
  const dr = s.dr;
  if (!dr || 'error' in dr) return fail(name, `${where}: cannot read the DR copy: ${dr ? dr.error : 'not read'}`, 'check drCeph\'s caps on the DR pool (profile rbd)');
  if (!dr.present) return fail(name, `${where} mirrors, but the DR site has no copy of it`, 'the DR site\'s rbd-mirror (dr rbd-mirror line); vmsnap mirror status ' + d.domain);
  if (dr.primary) return fail(name, `${where}: the DR copy is primary too (split brain, or promoted there)`, 'demote one side as Ceph documents (rbd mirror image demote), then resync');
  const status = dr.daemon?.status ?? 'no status';
  const copied = dr.lastCopied ? `mirror snapshot ${dr.lastCopied.primarySnapId} copied` : 'no mirror snapshot copied yet';
  if (status !== 'up+replaying') return fail(name, `${where}: DR copy ${status}; ${copied}`, 'the DR site\'s rbd-mirror (dr rbd-mirror line)');
  return ok(name, `${where} mirrors in snapshot mode, primary here; DR copy up+replaying, ${copied}`);
}
