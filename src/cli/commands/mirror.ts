import { Snapshotter } from '../../ceph';
import type { IoCtx, SnapRequest } from '../../ceph';
import type { Config } from '../../config';
import { withCeph } from '../ceph-session';
import { configFrom, onePositional } from '../config-flags';
import { messageOf } from '../doctor/check';
import { CliError, Exit } from '../exit-codes';
import { diskSpec, domainRbdDisks, poolSpec } from '../mirror/disks';
import type { MirrorDisk } from '../mirror/disks';
import { withDrSite } from '../mirror/dr-site';
import { readDrImage, readImageMirroring } from '../mirror/image';
import type { DrImageView, ImageMirroring } from '../mirror/image';
import { disablePlan, enablePlan, isRefused } from '../mirror/plan';
import type { MirrorStep, Plan } from '../mirror/plan';
import { poolRefusal, readPoolMirroring } from '../mirror/pool';
import type { PoolMirroring } from '../mirror/pool';
import { parseCommand, pickSubcommand } from '../options';
import { emit } from '../output';
import { MIRROR } from '../specs/mirror';

/*
 * `vmsnap mirror enable|status|disable <domain>` (docs/dr.md#setting-it-up): the per-image steps of
 * snapshot-mode mirroring for every RBD disk of a VM. Everything is read and checked before the
 * first change; the changes go through a snapshotter child, bounded (on a live image they go
 * through its lock owner, the VM's QEMU, like a snapshot).
 */

const DEFAULT_TIMEOUT_MS = 30_000;

export async function run(argv: string[]): Promise<number> {
  const picked = pickSubcommand(MIRROR, argv);
  if (!picked) return Exit.ok;
  const parsed = parseCommand(picked.sub, picked.rest);
  if (!parsed) return Exit.ok;
  const sub = picked.sub.name.slice('mirror '.length) as 'enable' | 'status' | 'disable';
  const domain = onePositional(parsed.positionals, picked.sub.name, 'domain');
  const config = configFrom(parsed.values);
  const json = !!parsed.values.json;
  const { name, disks } = await domainRbdDisks(config.libvirt.uri, domain);
  if (sub === 'status') return status(config, name, disks, json);
  const timeoutMs = (parsed.ms as { timeout?: number }).timeout ?? DEFAULT_TIMEOUT_MS;
  return change(config, sub, name, disks, timeoutMs, json);
}

/** One IoCtx per pool/namespace of the disks. */
async function poolsOf(disks: MirrorDisk[], open: (pool: string, namespace: string) => Promise<IoCtx>): Promise<Map<string, IoCtx>> {
  const out = new Map<string, IoCtx>();
  for (const d of disks) if (!out.has(poolSpec(d))) out.set(poolSpec(d), await open(d.pool, d.namespace));
  return out;
}

const request = (d: MirrorDisk): SnapRequest => ({ pool: d.pool, ...(d.namespace ? { namespace: d.namespace } : {}), image: d.image, snap: '' });

function describe(m: ImageMirroring): string {
  if (!m.exists) return 'no such image';
  if (m.state === 'disabled') return 'not mirrored';
  return `${m.state}${m.mode ? `, ${m.mode} mode` : ''}, ${m.primary ? 'primary' : 'not primary'}`;
}

async function change(config: Config, op: 'enable' | 'disable', domain: string, disks: MirrorDisk[], timeoutMs: number, json: boolean): Promise<number> {
  return withCeph(config, async (open) => {
    const ios = await poolsOf(disks, open);
    if (op === 'enable') {
      const refusals: string[] = [];
      for (const io of ios.values()) {
        const why = poolRefusal(await readPoolMirroring(io));
        if (why) refusals.push(`${why.problem}: ${why.fix}`);
      }
      if (refusals.length) throw new CliError(`mirror enable ${domain} refused, nothing changed: ${refusals.join('; ')}`, Exit.badInput, 'MirrorPoolNotReady');
    }
    const before = await Promise.all(disks.map((d) => readImageMirroring(ios.get(poolSpec(d))!, d.image)));
    const plans: Plan[] = before.map(op === 'enable' ? enablePlan : disablePlan);
    const refused = disks.flatMap((d, i) => {
      const p = plans[i]!;
      return isRefused(p) ? [`${d.target} (${diskSpec(d)}): ${p.refused}`] : [];
    });
    if (refused.length) throw new CliError(`mirror ${op} ${domain} refused, nothing changed: ${refused.join('; ')}`, Exit.badInput, 'MirrorImageRefused');

    const steps = plans.map((p) => (isRefused(p) ? [] : p.steps));
    const done = disks.map((): MirrorStep[] => []);
    const problems: string[] = [];
    const order: MirrorStep[] = op === 'enable' ? ['exclusive-lock', 'mirror-enable'] : ['mirror-disable'];
    if (steps.some((s) => s.length)) {
      const { conf, id, keyring } = config.ceph;
      const snapshotter = new Snapshotter({ conf, id, keyring, connectTimeoutSec: 10 });
      try {
        for (const step of order) {
          const which = disks.flatMap((d, i) => (steps[i]!.includes(step) ? [i] : []));
          if (!which.length) continue;
          const reqs = which.map((i) => request(disks[i]!));
          const r = await snapshotter.setUpMirroring(step, reqs, { timeoutMs });
          which.forEach((i, k) => {
            if (r.done.has(reqs[k]!)) done[i]!.push(step);
          });
          for (const f of r.failed) problems.push(`${f.request.pool}/${f.request.image}: ${step} failed: ${f.error.message}`);
          for (const q of [...r.mayCompleteLate, ...r.notSent]) {
            problems.push(`${q.pool}/${q.image}: ${step} got no answer within ${timeoutMs} ms (the image's lock owner, its VM's QEMU, does not answer, or the cluster is unavailable); it may still happen: vmsnap mirror status ${domain}`);
          }
          if (problems.length) break;
        }
      } finally {
        await snapshotter.close();
      }
    }
    const after = await Promise.all(disks.map((d) => readImageMirroring(ios.get(poolSpec(d))!, d.image)));
    const rows = disks.map((d, i) => ({
      target: d.target,
      image: diskSpec(d),
      changed: done[i]!.length > 0,
      steps: done[i]!,
      before: describe(before[i]!),
      after: describe(after[i]!),
      ...(after[i]!.globalId ? { globalId: after[i]!.globalId } : {}),
    }));
    const reached = (m: ImageMirroring) => (op === 'enable' ? m.state === 'enabled' && m.mode === 'snapshot' && m.primary : m.state === 'disabled');
    disks.forEach((d, i) => {
      if (!reached(after[i]!) && !problems.some((p) => p.startsWith(`${d.pool}/${d.image}:`))) problems.push(`${diskSpec(d)}: ${describe(after[i]!)} after ${op}`);
    });
    emit(json, { domain, operation: op, ok: !problems.length, disks: rows, ...(problems.length ? { problems } : {}) }, () =>
      rows.map((r) => `${domain} ${r.target} ${r.image}: ${r.changed ? `${r.before} → ${r.after} (${r.steps.join(', ')})` : `${r.after} (unchanged)`}`).join('\n'),
    );
    if (problems.length) throw new CliError(`mirror ${op} ${domain}: ${problems.join('; ')}`, Exit.failed, 'MirrorSetupFailed');
    return Exit.ok;
  });
}

async function status(config: Config, domain: string, disks: MirrorDisk[], json: boolean): Promise<number> {
  return withCeph(config, async (open) => {
    const ios = await poolsOf(disks, open);
    const pools = new Map<string, PoolMirroring | { spec: string; error: string }>();
    for (const [spec, io] of ios) pools.set(spec, await readPoolMirroring(io).catch((err: unknown) => ({ spec, error: messageOf(err) })));
    const local = await Promise.all(disks.map((d) => readImageMirroring(ios.get(poolSpec(d))!, d.image)));
    const drRead = await withDrSite(config, async (site) => ({
      fsid: site.fsid,
      disks: await Promise.all(disks.map((d) => site.open(d.pool, d.namespace).then((io) => readDrImage(io, d.image)).catch((err: unknown) => ({ error: messageOf(err) })))),
    }));
    const siteName = (uuid: string) => {
      for (const p of pools.values()) for (const peer of 'peers' in p ? p.peers : []) if (peer.mirrorUuid === uuid) return peer.siteName;
      return uuid;
    };
    const drSite = drRead === undefined ? null : 'error' in drRead ? { error: drRead.error } : { fsid: drRead.fsid };
    const rows = disks.map((d, i) => {
      const m = local[i]!;
      const dr = drRead && !('error' in drRead) ? drRead.disks[i]! : undefined;
      return {
        target: d.target,
        image: diskSpec(d),
        exists: m.exists,
        state: m.state,
        ...(m.mode ? { mode: m.mode } : {}),
        primary: m.primary,
        ...(m.globalId ? { globalId: m.globalId } : {}),
        exclusiveLock: m.exclusiveLock,
        sites: m.sites.map((s) => ({ site: s.mirrorUuid ? siteName(s.mirrorUuid) : 'local', ...s })),
        ...(dr ? { drSite: dr } : {}),
      };
    });
    const doc = {
      domain,
      pools: [...pools.values()].map((p) => ('error' in p ? p : { spec: p.spec, mode: p.mode, peers: p.peers.map((x) => ({ site: x.siteName, direction: x.direction, uuid: x.uuid, mirrorUuid: x.mirrorUuid, lastSeen: x.lastSeen })) })),
      drSite,
      disks: rows,
    };
    emit(json, doc, () => humanStatus(doc));
    return Exit.ok;
  });
}

function humanDr(dr: DrImageView | { error: string }): string {
  if ('error' in dr) return `DR site: ${dr.error}`;
  if (!dr.present) return 'DR site: no copy';
  const parts = [`copy ${dr.primary ? 'PRIMARY there' : 'non-primary'}`];
  if (dr.daemon) parts.push(`rbd-mirror ${dr.daemon.status}`);
  parts.push(dr.lastCopied ? `mirror snapshot ${dr.lastCopied.primarySnapId} copied` : 'no mirror snapshot copied yet');
  if (dr.copying) parts.push(`copying ${dr.copying.primarySnapId} (${dr.copying.objects} objects)`);
  return `DR site: ${parts.join(', ')}`;
}

type StatusDoc = {
  domain: string;
  pools: ({ spec: string; error: string } | { spec: string; mode: string; peers: { site: string; direction: string; mirrorUuid: string }[] })[];
  drSite: { fsid: string } | { error: string } | null;
  disks: { target: string; image: string; exists: boolean; state: string; mode?: string; primary: boolean; sites: { site: string; status: string }[]; drSite?: DrImageView | { error: string } }[];
};

function humanStatus(doc: StatusDoc): string {
  const lines = doc.pools.map((p) =>
    'error' in p
      ? `pool ${p.spec}: ${p.error}`
      : `pool ${p.spec}: mirror mode ${p.mode}; peers: ${p.peers.map((x) => `${x.site || '?'} (${x.direction}${x.mirrorUuid ? '' : ', not registered'})`).join(', ') || 'none'}`,
  );
  lines.push(doc.drSite === null ? 'DR site: not configured (drCeph)' : 'error' in doc.drSite ? `DR site: ${doc.drSite.error}` : `DR site: fsid ${doc.drSite.fsid}`);
  for (const d of doc.disks) {
    const head = !d.exists ? 'no such image' : d.state === 'disabled' ? 'not mirrored' : `${d.state}, ${d.mode ?? '?'} mode, ${d.primary ? 'primary' : 'not primary'}`;
    const sites = d.sites.filter((s) => s.site !== 'local').map((s) => `${s.site}: ${s.status}`);
    lines.push(`${doc.domain} ${d.target} ${d.image}: ${[head, ...sites, ...(d.drSite ? [humanDr(d.drSite)] : [])].join('; ')}`);
  }
  return lines.join('\n');
}
