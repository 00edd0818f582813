import { constants } from 'node:os';
import { RadosCluster, RbdError, cloneImage, imageExists, isPermissionDenied, openImage, removeImage } from '../../ceph';
import type { IoCtx, ImageLocation } from '../../ceph';
import { demoteImageCli, promoteImageCli } from '../../ceph/mirror-cli';
import { waitDemotionCopied } from '../../dr/demotion';
import { choosePoint, askPrimary, checkTrusted, drDefinition, drRestoredUuid, drSideOf, DrRestoreRefusal, plannedDemotion } from '../../dr/plan';
import type { DrRestorePlan, DrRestoreRequest } from '../../dr/plan';
import { readRestoreKey } from '../../host/restore-key';
import { isNoDomain } from '../../libvirt';
import type { LibvirtClient } from '../../libvirt';
import type { Config } from '../../config';
import { connectLibvirt } from '../libvirt-session';
import { configFrom, onePositional } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { parseCommand } from '../options';
import { DR_RESTORE } from '../specs/dr-restore';

/*
 * `vmsnap dr-restore` (docs/dr.md#recovery-on-the-dr-site): straight through this host's libvirt
 * and the two clusters, no Temporal (the primary site's may be what was lost). Plan (read only,
 * both sites; any refusal exits 2 with nothing changed) → (--planned: demote the primary's images,
 * wait for the demotion on the DR site) → promote each DR copy → clone each disk from the run's
 * snapshot → (sha256) → define → start → the agent answers. A failure after the promotion removes
 * the VM and the clones again; the promotion stays, and the output says so.
 */

export interface DrRestoreResult {
  domain: { name: string; uuid: string };
  from: { workflowId: string; runId: string; snapshot: string; quiesced: boolean; recordedAt: string; domain: string };
  /** --planned: the primary site's images this run demoted (an earlier try's are not listed again). */
  demoted: string[];
  promoted: { image: string; force: boolean; already: boolean }[];
  primary: DrRestorePlan['primary'];
  disks: { target: string; disk: string; from: string; sha256?: string }[];
  /** False with --no-start: defined, shut off. */
  started: boolean;
  stepsMs: Record<string, number>;
}

const PROMOTE_TIMEOUT_MS = 30_000;
const DEMOTION_WAIT_MS = 5 * 60_000;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(DR_RESTORE, argv);
  if (!parsed) return Exit.ok;
  const { values, ms } = parsed;
  const json = !!values.json;
  const domain = onePositional(parsed.positionals, 'dr-restore', 'domain');
  if (!values.as) throw new CliError('dr-restore needs --as NEW-NAME (the recovered VM)', Exit.badInput, 'InvalidInput');
  if (!values.secret || !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(values.secret)) {
    throw new CliError('dr-restore needs --secret UUID: the libvirt ceph secret with the DR cluster key QEMU uses', Exit.badInput, 'InvalidInput');
  }
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(values.as)) throw new CliError(`invalid --as ${values.as}`, Exit.badInput, 'InvalidInput');
  if (values.planned && values.force) throw new CliError('--planned and --force exclude each other: a planned failover promotes without force', Exit.badInput, 'InvalidInput');
  if (!values.planned && ms['demotion-wait'] !== undefined) throw new CliError('--demotion-wait goes with --planned', Exit.badInput, 'InvalidInput');
  const config = configFrom(values);
  const dr = config.drCeph;
  if (!dr) throw new CliError('dr-restore runs on a host attached to the DR cluster: configure drCeph (VMSNAP_DR_CEPH_CONF, ...)', Exit.badInput, 'MirrorUnavailable');
  const steps: Record<string, number> = {};
  const t = async <T>(step: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      steps[step] = Math.round(performance.now() - t0);
    }
  };

  let cluster: RadosCluster;
  try {
    cluster = await RadosCluster.connect({ conf: dr.conf, id: dr.id, keyring: dr.keyring, connectTimeoutSec: 10 });
  } catch (err) {
    throw new CliError(`cannot connect to the DR cluster as client.${dr.id}: ${(err as Error).message}`, isPermissionDenied(err) ? Exit.authRefused : Exit.unreachable);
  }
  const pool = values.pool ?? 'vms';
  let io: IoCtx | undefined;
  let lv: LibvirtClient | undefined;
  try {
    io = await cluster.openIoCtx(pool).catch((err: Error) => {
      throw new CliError(`cannot open pool ${pool} on the DR cluster: ${err.message}`, isPermissionDenied(err) ? Exit.authRefused : Exit.badInput);
    });
    lv = await connectLibvirt(config.libvirt.uri);
    const plan = await t('plan', () => planRestore(io!, lv!, config, domain, values, pool));
    const result = await act(io, lv, config, plan, {
      verify: !!values.verify,
      start: !values['no-start'],
      readyTimeoutMs: ms['ready-timeout'] ?? 180_000,
      demotionWaitMs: ms['demotion-wait'] ?? DEMOTION_WAIT_MS,
    }, t);
    result.stepsMs = steps;
    emit(json, result, () => human(result));
    return Exit.ok;
  } catch (err) {
    if (err instanceof DrRestoreRefusal) throw new CliError(`dr-restore ${domain}: ${err.message}`, Exit.badInput, err.type);
    throw err;
  } finally {
    await lv?.close().catch(() => undefined);
    await io?.close().catch(() => undefined);
    await cluster.shutdown().catch(() => undefined);
  }
}

async function planRestore(io: IoCtx, lv: LibvirtClient, config: Config, domain: string, values: Record<string, unknown>, pool: string): Promise<DrRestorePlan> {
  const from = (values.from as string | undefined) ?? 'latest';
  const name = values.as as string;
  const point = await choosePoint(io, domain, from, pool);
  checkTrusted(point, await readRestoreKey(config.restoreKeyFile));
  const drSide = await drSideOf(io, point);
  const globalIds = new Map([...drSide].map(([k, v]) => [k, v.globalId]));
  const primary = await askPrimary(config.ceph, point, globalIds);
  const stillPrimary = primary.reachable ? primary.images.filter((i) => i.state === 'primary').map((i) => i.image) : [];
  const toPromote = point.disks.filter((d) => !drSide.get(d.source)!.primary && drSide.get(d.source)!.enabled);
  const demote = values.planned && toPromote.length ? await plannedDemotion({ ...config.ceph, timeoutMs: PROMOTE_TIMEOUT_MS }, primary) : undefined;
  if (stillPrimary.length && toPromote.length && !values.force && !demote) {
    throw new DrRestoreRefusal(
      `the primary site is reachable and ${stillPrimary.join(', ')} still primary there: promoting the DR copies now makes two primaries that both take writes (split brain; rbd-mirror stops replicating and one side's writes must be discarded later). Demote them there first (rbd mirror image demote), or pass --force if the primary site must be abandoned`,
      'PrimaryStillActive',
    );
  }
  // Plain promotion works only once the primary's demotion reached this copy; otherwise force.
  const forcePromote = !demote && !(primary.reachable && primary.images.every((i) => i.state === 'demoted'));
  try {
    await lv.lookupDomainByName(name);
    throw new DrRestoreRefusal(`a domain named ${name} already exists on this host`, 'NameConflict');
  } catch (err) {
    if (!isNoDomain(err)) throw err;
  }
  const disks = point.disks.map((d) => {
    const image = d.source.split('/').at(-1)!;
    return { target: d.target, image: { pool, image }, snap: point.snap, clone: { pool, image: `${name}-${d.target}` }, alreadyPrimary: drSide.get(d.source)!.primary };
  });
  for (const d of disks) {
    if (await imageExists(io, d.clone.image)) throw new DrRestoreRefusal(`image ${pool}/${d.clone.image} already exists on the DR site`, 'NameConflict');
  }
  const uuid = drRestoredUuid(name, point);
  const authUser = (values['auth-user'] as string | undefined) ?? /<auth\s+username=(['"])([^'"]+)\1/.exec(point.domainXml)?.[2] ?? 'admin';
  const req: DrRestoreRequest = {
    domain,
    from,
    as: name,
    pool,
    force: !!values.force,
    site: { conf: (values['disk-ceph-conf'] as string | undefined) ?? config.drCeph!.conf, authUser, secretUuid: values.secret as string },
  };
  const clones = new Map(point.disks.map((d, i) => [d.source, `${pool}/${disks[i]!.clone.image}`]));
  const xml = drDefinition(req, point, uuid, clones, config.imagePool);
  return { point, name, uuid, disks, xml, forcePromote, primary, ...(demote ? { demote } : {}) };
}

async function act(
  io: IoCtx,
  lv: LibvirtClient,
  config: Config,
  plan: DrRestorePlan,
  o: { verify: boolean; start: boolean; readyTimeoutMs: number; demotionWaitMs: number },
  t: <T>(step: string, fn: () => Promise<T>) => Promise<T>,
): Promise<DrRestoreResult> {
  const cli = { ...config.drCeph!, timeoutMs: PROMOTE_TIMEOUT_MS };
  const until = Date.now() + o.demotionWaitMs;
  const demoted = plan.demote ? await demotePrimary(io, config, plan, o.demotionWaitMs, t) : [];
  // rbd-mirror keeps the copy open, and its lock, until it has stopped replaying the demoted
  // primary, a little after the demotion's copy is complete; its lock policy answers a request for
  // that lock with EROFS. A plain promotion needs the lock: asked again until rbd-mirror let go.
  const promote = async (d: ImageLocation): Promise<void> => {
    for (;;) {
      try {
        return await promoteImageCli(cli, d, plan.forcePromote);
      } catch (err) {
        if (!plan.demote || !(err instanceof RbdError && err.errno === constants.errno.EROFS) || Date.now() >= until) throw err;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  };
  const promoted: DrRestoreResult['promoted'] = [];
  await t('promote', async () => {
    for (const d of plan.disks) {
      if (!d.alreadyPrimary) {
        await promote(d.image).catch((err: Error) => {
          throw new CliError(`promote ${d.image.pool}/${d.image.image}${plan.forcePromote ? ' --force' : ''} failed (${promoted.length} promoted before it, kept): ${err.message}`, Exit.failed, 'PromoteFailed');
        });
      }
      promoted.push({ image: `${d.image.pool}/${d.image.image}`, force: !d.alreadyPrimary && plan.forcePromote, already: d.alreadyPrimary });
    }
  });
  let defined = false;
  const made: string[] = [];
  try {
    const sums: (string | undefined)[] = [];
    await t('clone', async () => {
      for (const d of plan.disks) {
        await cloneImage(io, d.image.image, d.snap, io, d.clone.image);
        made.push(d.clone.image);
      }
    });
    if (o.verify) {
      await t('verify', async () => {
        for (const d of plan.disks) {
          const img = await openImage(io, d.clone.image, { readOnly: true });
          try {
            sums.push(await img.checksum());
          } finally {
            await img.close();
          }
        }
      });
    }
    const dom = await t('define', () => lv.domainDefineXml(plan.xml));
    defined = true;
    if (o.start) {
      await t('start', () => lv.domainCreate(dom));
      await t('ready', () => waitAgent(lv, plan.name, o.readyTimeoutMs));
    }
    return {
      domain: { name: plan.name, uuid: plan.uuid },
      demoted,
      from: { workflowId: plan.point.workflowId, runId: plan.point.runId, snapshot: plan.point.snap, quiesced: plan.point.quiesced, recordedAt: plan.point.recordedAt, domain: plan.point.domain.name },
      promoted,
      primary: plan.primary,
      disks: plan.disks.map((d, i) => ({ target: d.target, disk: `${d.clone.pool}/${d.clone.image}`, from: `${d.image.pool}/${d.image.image}@${d.snap}`, ...(sums[i] ? { sha256: sums[i] } : {}) })),
      started: o.start,
      stepsMs: {},
    };
  } catch (err) {
    if (defined) {
      const dom = await lv.lookupDomainByName(plan.name).catch(() => undefined);
      if (dom) {
        await lv.domainDestroy(dom).catch(() => undefined);
        await lv.domainUndefineFlags(dom).catch(() => undefined);
      }
    }
    for (const c of made) await removeImage(io, c).catch(() => undefined);
    const why = err instanceof Error ? err.message : String(err);
    throw new CliError(`dr-restore ${plan.name} failed after promoting ${promoted.map((p) => p.image).join(', ')} (kept primary on the DR site); its VM and clones were removed: ${why}`, Exit.failed, err instanceof CliError ? err.type : 'DrRestoreFailed');
  }
}

/**
 * --planned, after the plan: `rbd mirror image demote` of each image still primary at the primary
 * site, then the wait until every DR copy to promote has the demotion. Past the wait, exit 1 with
 * the primary left demoted — its VM must stay off, and a second run goes on waiting.
 */
async function demotePrimary(
  io: IoCtx,
  config: Config,
  plan: DrRestorePlan,
  waitMs: number,
  t: <T>(step: string, fn: () => Promise<T>) => Promise<T>,
): Promise<string[]> {
  const cli = { ...config.ceph, timeoutMs: PROMOTE_TIMEOUT_MS };
  const demoted: string[] = [];
  const spec = (d: { pool: string; namespace?: string; image: string }) => `${d.pool}/${d.namespace ? `${d.namespace}/` : ''}${d.image}`;
  await t('demote', async () => {
    for (const d of plan.demote!) {
      await demoteImageCli(cli, d).catch((err: Error) => {
        throw new CliError(`demote ${spec(d)} on the primary site failed (${demoted.length ? `${demoted.join(', ')} demoted before it, kept` : 'nothing demoted'}): ${err.message}`, Exit.failed, 'DemoteFailed');
      });
      demoted.push(spec(d));
    }
  });
  const waitFor = plan.disks.filter((d) => !d.alreadyPrimary).map((d) => d.image.image);
  const left = await t('demotion', () => waitDemotionCopied(io, waitFor, waitMs));
  if (left.length) {
    throw new CliError(
      `the demotion of the primary's images did not reach the DR site's copies of ${left.join(', ')} within ${waitMs} ms: nothing promoted, the primary site's images stay demoted (keep its VM off). ` +
        `Run dr-restore --planned again to wait on, or give the primary back: rbd mirror image promote POOL/IMAGE on the primary cluster`,
      Exit.failed,
      'DemotionNotCopied',
    );
  }
  return demoted;
}

/** guest-ping every second until it answers or `timeoutMs` runs out (GuestNotReady). */
async function waitAgent(lv: LibvirtClient, name: string, timeoutMs: number): Promise<void> {
  const dom = await lv.lookupDomainByName(name);
  const until = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < until) {
    try {
      await lv.guestPing(dom, 2);
      return;
    } catch (err) {
      if (isNoDomain(err)) throw err;
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new CliError(`${name}'s guest agent did not answer within ${timeoutMs} ms: ${last}`, Exit.failed, 'GuestNotReady');
}

function human(r: DrRestoreResult): string {
  const p = r.primary.reachable ? `primary site: ${r.primary.images.map((i) => `${i.image} ${i.state}`).join(', ')}` : `primary site unreachable (${r.primary.why})`;
  const lines = [
    `recovered on the DR site${r.started ? '' : ' (defined, not started)'}: ${r.domain.name} from ${r.from.workflowId} (${r.from.domain}, recorded ${r.from.recordedAt}), quiesced=${r.from.quiesced}`,
    `  ${p}${r.demoted.length ? `; demoted there: ${r.demoted.join(', ')}` : ''}; promoted: ${r.promoted.map((x) => `${x.image}${x.already ? ' (already primary)' : x.force ? ' (forced)' : ''}`).join(', ')}`,
  ];
  for (const d of r.disks) lines.push(`  ${d.target}: ${d.disk} ← ${d.from}${d.sha256 ? ` sha256 ${d.sha256}` : ''}`);
  return lines.join('\n');
}
