import { DOMAIN_NAME, DOMAIN_UUID, RBD_NAME } from '../../model/input';
import { imageSetsOf } from '../../model/restore-point';
import type { ImageSet } from '../../model/restore-point';
import { readCatalog } from '../../restore/catalog';
import { withCeph } from '../ceph-session';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';

const HELP = `Usage: vmsnap list <domain> [--pool POOL] [--json]

Every image set vmsnap made of a VM (by its name or UUID), newest first: time, the run's workflow
id, quiesced, disks → images and sizes, schedule, whether the set can be restored, and the last
"vmsnap verify" verdict on it. Reads the
images' RBD metadata straight from Ceph (no Temporal needed).

  --pool POOL              image pool (default: the configured image pool, "images")
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { pool: { type: 'string' } });
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
  if (positionals.length !== 1) throw new CliError('list takes exactly one domain', Exit.badInput);
  const domain = positionals[0]!;
  if (!DOMAIN_NAME.test(domain) && !DOMAIN_UUID.test(domain)) throw new CliError(`invalid domain "${domain}"`, Exit.badInput);
  const config = configFrom(values);
  const pool = values.pool ?? config.imagePool;
  if (!RBD_NAME.test(pool)) throw new CliError(`invalid pool "${pool}"`, Exit.badInput);
  const sets = await withCeph(config, async (open) => imageSetsOf(domain, await readCatalog(await open(pool))));
  emit(!!values.json, { domain, pool, sets }, () => human(domain, sets));
  return Exit.ok;
}

function human(domain: string, sets: ImageSet[]): string {
  if (!sets.length) return `${domain}: no image sets`;
  const lines: string[] = [];
  for (const s of sets) {
    const flags = [s.quiesced === null ? 'quiesced=?' : `quiesced=${s.quiesced}`, s.restorable ? 'restorable' : s.complete ? 'no restore record' : 'INCOMPLETE'];
    if (s.schedule) flags.push(`schedule=${s.schedule}`);
    if (s.verification) flags.push(`${s.verification.verdict === 'verified' ? 'VERIFIED' : 'VERIFY-FAILED'} ${s.verification.at}`);
    lines.push(`${s.createdAt}  ${s.workflowId}  ${flags.join('  ')}`);
    for (const d of s.disks) lines.push(`    ${d.target.padEnd(5)} → ${d.image}  ${mib(d.sizeBytes)}${d.state === 'complete' ? '' : `  (${d.state || 'no state'})`}`);
  }
  return lines.join('\n');
}

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(bytes % 1048576 ? 1 : 0)} MiB`;
}
