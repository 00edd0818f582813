import { openImage } from '../../ceph';
import { isPermissionDenied } from '../../ceph/errors';
import { DOMAIN_NAME, DOMAIN_UUID, RBD_NAME } from '../../model/input';
import { readCatalog } from '../../restore/catalog';
import { inUse, removeOwnedImage } from '../../retention/owned-images';
import { withCeph } from '../ceph-session';
import { configFrom, onePositional } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit } from '../output';
import { commandScope } from '../scope';
import { planDelete } from '../set-plans';
import { DELETE } from '../specs/image-sets';

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(DELETE, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  const domain = onePositional(parsed.positionals, 'delete', 'domain');
  if (!DOMAIN_NAME.test(domain) && !DOMAIN_UUID.test(domain)) throw new CliError(`invalid domain "${domain}"`, Exit.badInput);
  const workflowId = values.run;
  if (workflowId === undefined) throw new CliError('--run RUN is required: the workflow id of the set to delete (vmsnap list shows it)', Exit.badInput);
  if (!RUN_ID.test(workflowId)) throw new CliError(`invalid --run "${workflowId}"`, Exit.badInput);
  const config = configFrom(values);
  const pool = values.pool ?? config.imagePool;
  if (!RBD_NAME.test(pool)) throw new CliError(`invalid pool "${pool}"`, Exit.badInput);
  const json = !!values.json;
  const scope = await commandScope(config);

  return withCeph(config, async (open) => {
    const io = await open(pool);
    const plan = planDelete(await readCatalog(io), { pool, domain, workflowId, scope });
    // Every image checked before the first removal: a set is removed whole or not at all.
    const busy: string[] = [];
    for (const name of plan.images) {
      const img = await openImage(io, name, { readOnly: true });
      try {
        const why = await inUse(img);
        if (why) busy.push(`${name} ${why}`);
      } finally {
        await img.close();
      }
    }
    if (busy.length) throw new CliError(`run ${workflowId}'s set is in use, nothing removed: ${busy.join('; ')}`, Exit.badInput, 'SetInUse');
    const base = { domain: plan.owner.domain, domainUuid: plan.owner.domainUuid, pool, workflowId, createdAt: plan.createdAt, quiesced: plan.quiesced, images: plan.images };
    if (values['dry-run']) {
      emit(json, { ...base, dryRun: true, removed: [], left: [] }, () => `would remove ${plan.owner.domain}'s set ${workflowId} (${plan.createdAt}): ${plan.images.join(', ')}; nothing removed (--dry-run)`);
      return Exit.ok;
    }
    const removed: string[] = [];
    const left: { image: string; reason: string }[] = [];
    let refused = false;
    for (const name of plan.images) {
      const why = await removeOwnedImage(io, name, plan.owner).catch((err: unknown) => {
        refused ||= isPermissionDenied(err);
        return `removal failed: ${(err as Error).message}`;
      });
      if (why && why !== 'already gone') left.push({ image: name, reason: why });
      else removed.push(name);
    }
    emit(json, { ...base, dryRun: false, removed, left }, () =>
      left.length
        ? `removed ${removed.length} of ${plan.images.length} image(s) of ${workflowId}; left: ${left.map((l) => `${l.image} (${l.reason})`).join(', ')}`
        : `removed ${plan.owner.domain}'s set ${workflowId} (${plan.createdAt}): ${removed.join(', ')}`,
    );
    return refused ? Exit.authRefused : left.length ? Exit.failed : Exit.ok;
  });
}
