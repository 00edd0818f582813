import { isPermissionDenied } from '../../ceph/errors';
import { DOMAIN_NAME, DOMAIN_UUID, RBD_NAME } from '../../model/input';
import { readCatalog } from '../../restore/catalog';
import { removeOwnedImage } from '../../retention/owned-images';
import { withCeph } from '../ceph-session';
import { configFrom, onePositional } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit } from '../output';
import { retentionFrom, retentionText } from '../retention-flags';
import { SCHEDULE_ID } from '../schedule/spec';
import { commandScope } from '../scope';
import { planPrune } from '../set-plans';
import type { PrunePlan } from '../set-plans';
import { PRUNE } from '../specs/image-sets';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(PRUNE, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  const domain = onePositional(parsed.positionals, 'prune', 'domain');
  if (!DOMAIN_NAME.test(domain) && !DOMAIN_UUID.test(domain)) throw new CliError(`invalid domain "${domain}"`, Exit.badInput);
  const policy = retentionFrom(values);
  if (!policy) throw new CliError('prune needs a policy: at least one of --keep-last, --keep-daily, --keep-weekly, --keep-monthly', Exit.badInput);
  const scheduleId = values.schedule;
  if (scheduleId !== undefined && !SCHEDULE_ID.test(scheduleId)) throw new CliError(`invalid --schedule "${scheduleId}"`, Exit.badInput);
  const config = configFrom(values);
  const pool = values.pool ?? config.imagePool;
  if (!RBD_NAME.test(pool)) throw new CliError(`invalid pool "${pool}"`, Exit.badInput);
  const dryRun = !!values['dry-run'];
  const scope = await commandScope(config);

  return withCeph(config, async (open) => {
    const io = await open(pool);
    const plan = planPrune(await readCatalog(io), { pool, domain, scope, policy, now: Date.now(), ...(scheduleId !== undefined ? { scheduleId } : {}) });
    const removed: string[] = [];
    const skipped: { image: string; reason: string }[] = [];
    let failed = false;
    let refused = false;
    if (!dryRun && plan.owner) {
      for (const set of plan.sets.filter((s) => !s.reasons.length)) {
        for (const name of set.images) {
          const why = await removeOwnedImage(io, name, plan.owner).catch((err: unknown) => {
            failed = true;
            refused ||= isPermissionDenied(err);
            return `removal failed: ${(err as Error).message}`;
          });
          if (why && why !== 'already gone') skipped.push({ image: name, reason: why });
          else removed.push(name);
        }
      }
    }
    const out = {
      domain: plan.owner?.domain ?? domain,
      domainUuid: plan.owner?.domainUuid ?? null,
      pool,
      schedule: scheduleId ?? null,
      policy,
      dryRun,
      sets: plan.sets.map((s) => ({ ...s, action: s.reasons.length ? 'keep' : 'remove' })),
      ignoredSets: plan.ignored,
      removed,
      skipped,
    };
    emit(!!values.json, out, () => human(plan, { domain, pool, policy: retentionText(policy), dryRun, removed, skipped }));
    return refused ? Exit.authRefused : failed ? Exit.failed : Exit.ok;
  });
}

function human(plan: PrunePlan, o: { domain: string; pool: string; policy: string; dryRun: boolean; removed: string[]; skipped: { image: string; reason: string }[] }): string {
  const ignored = plan.ignored ? ` (${plan.ignored} more set(s) under this name are not vmsnap's to prune here: no VM UUID recorded, another namespace or fleet, or an earlier name)` : '';
  if (!plan.owner) return `${o.domain}: no image sets vmsnap may prune in ${o.pool}${ignored}`;
  const drop = plan.sets.filter((s) => !s.reasons.length);
  const lines = [`${plan.owner.domain} (${plan.owner.domainUuid}), pool ${o.pool}: ${plan.sets.length} set(s); policy ${o.policy}${ignored}`];
  for (const s of plan.sets) {
    const what = s.reasons.length ? `keep    ${s.reasons.join(', ')}` : 'remove';
    lines.push(`${s.createdAt}  ${s.workflowId}  quiesced=${s.quiesced ?? '?'}  ${what}`);
  }
  if (o.dryRun) lines.push(`dry run: would remove ${drop.length} set(s) (${drop.reduce((n, s) => n + s.images.length, 0)} image(s)); nothing removed`);
  else lines.push(`removed ${o.removed.length} image(s) of ${drop.length} set(s)`);
  for (const s of o.skipped) lines.push(`  left ${s.image}: ${s.reason}`);
  return lines.join('\n');
}
