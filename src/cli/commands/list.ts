import { DOMAIN_NAME, DOMAIN_UUID, RBD_NAME } from '../../model/input';
import { everyImageSet, imageSetsOf } from '../../model/restore-point';
import type { ImageSet } from '../../model/restore-point';
import { readCatalog } from '../../restore/catalog';
import { withCeph } from '../ceph-session';
import { configFrom } from '../config-flags';
import { CliError, Exit } from '../exit-codes';
import { parseCommand } from '../options';
import { emit } from '../output';
import { SCHEDULE_ID } from '../schedule/spec';
import { parseSince } from '../since';
import { LIST } from '../specs/image-sets';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(LIST, argv);
  if (!parsed) return Exit.ok;
  const { values, positionals } = parsed;
  if (positionals.length > 1) throw new CliError('list takes at most one domain (more with --domain)', Exit.badInput);
  const one = positionals[0];
  if (one !== undefined && values.domain) throw new CliError('give the domain as the argument or with --domain, not both', Exit.badInput);
  const domains = one !== undefined ? [one] : (values.domain ?? []);
  for (const d of domains) if (!DOMAIN_NAME.test(d) && !DOMAIN_UUID.test(d)) throw new CliError(`invalid domain "${d}"`, Exit.badInput);
  if (values.schedule !== undefined && !SCHEDULE_ID.test(values.schedule)) throw new CliError(`invalid --schedule "${values.schedule}"`, Exit.badInput);
  const since = values.since === undefined ? undefined : parseSince(values.since, Date.now());
  const config = configFrom(values);
  const pool = values.pool ?? config.imagePool;
  if (!RBD_NAME.test(pool)) throw new CliError(`invalid pool "${pool}"`, Exit.badInput);

  const catalog = await withCeph(config, async (open) => readCatalog(await open(pool)));
  const all = one !== undefined ? imageSetsOf(one, catalog) : everyImageSet(catalog);
  const sets = all.filter(
    (s) =>
      (one !== undefined || !domains.length || domains.some((d) => d === s.domain || d.toLowerCase() === s.domainUuid?.toLowerCase())) &&
      (values.quiesced === undefined || String(s.quiesced) === values.quiesced) &&
      (values.schedule === undefined || s.schedule === values.schedule) &&
      (since === undefined || Date.parse(s.createdAt) >= since),
  );
  // With <domain>, the document `vmsnap list <domain> --json` always had: { domain, pool, sets }.
  if (one !== undefined) {
    emit(!!values.json, { domain: one, pool, sets }, () => (sets.length ? lines(sets) : `${one}: no image sets`));
  } else {
    emit(!!values.json, { pool, sets }, () => grouped(sets));
  }
  return Exit.ok;
}

function grouped(sets: ImageSet[]): string {
  if (!sets.length) return 'no image sets';
  const out: string[] = [];
  let vm = '';
  for (const s of sets) {
    const head = `${s.domain || '?'}${s.domainUuid ? ` (${s.domainUuid})` : ''}`;
    if (head !== vm) out.push(`${out.length ? '\n' : ''}${head}`);
    vm = head;
    out.push(lines([s], '  '));
  }
  return out.join('\n');
}

function lines(sets: ImageSet[], indent = ''): string {
  const out: string[] = [];
  for (const s of sets) {
    const flags = [s.quiesced === null ? 'quiesced=?' : `quiesced=${s.quiesced}`, s.restorable ? 'restorable' : s.complete ? 'no restore record' : 'INCOMPLETE'];
    if (s.schedule) flags.push(`schedule=${s.schedule}`);
    if (s.verification) flags.push(`${s.verification.verdict === 'verified' ? 'VERIFIED' : 'VERIFY-FAILED'} ${s.verification.at}`);
    out.push(`${indent}${s.createdAt}  ${s.workflowId}  ${flags.join('  ')}`);
    for (const d of s.disks) out.push(`${indent}    ${d.target.padEnd(5)} → ${d.image}  ${mib(d.sizeBytes)}${d.state === 'complete' ? '' : `  (${d.state || 'no state'})`}`);
  }
  return out.join('\n');
}

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(bytes % 1048576 ? 1 : 0)} MiB`;
}
