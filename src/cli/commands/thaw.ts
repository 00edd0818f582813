import { connectLibvirt } from '../libvirt-session';
import { freezeGuardFor } from '../../safety/guard-for';
import { restoreAgentTimeout } from '../../safety/agent-timeout-restore';
import { thawAndConfirm } from '../../safety/thaw-confirm';
import { DOMAIN_NAME, DOMAIN_UUID } from '../../model/input';
import { configFrom, onePositional } from '../config-flags';
import { parseCommand } from '../options';
import { THAW } from '../specs/thaw';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { jsonLogger } from '../../worker/logger';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(THAW, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  const name = onePositional(parsed.positionals, 'thaw', 'domain');
  if (!DOMAIN_NAME.test(name) && !DOMAIN_UUID.test(name)) throw new CliError(`invalid domain "${name}"`, Exit.badInput);
  const config = configFrom(values);
  const lv = await connectLibvirt(config.libvirt.uri);
  try {
    const dom = await lv.lookupDomain(name).catch((err: Error) => {
      throw new CliError(`no domain ${name}: ${err.message}`, Exit.badInput);
    });
    const guard = freezeGuardFor(config, undefined, 5000);
    const journaled = await guard.read(dom.uuid);
    let r;
    try {
      r = await thawAndConfirm(lv, dom.uuid, 5);
    } catch (err) {
      throw new CliError(`${dom.name}: ${(err as Error).message}`, Exit.failed);
    }
    const wasFrozen = r.outcome === 'thawed' && r.wasFrozen;
    // Read after the thaw: the thaw must not wait for Ceph. A freeze another host made (the guest
    // migrated frozen) is vmsnap's too, and its obligation ends with this thaw.
    const recorded = journaled ? undefined : await guard.obligationOf(dom.uuid).catch(() => undefined);
    const whose = !wasFrozen
      ? 'nobody (the guest was not frozen)'
      : journaled
        ? `vmsnap run ${journaled.owner}`
        : recorded
          ? `vmsnap run ${recorded.owner} (frozen on ${recorded.host})`
          : 'not vmsnap (no journal entry on this host, no freeze obligation in Ceph)';
    if (journaled) {
      await guard.release(dom.uuid);
      if (journaled.mode === 'window') await restoreAgentTimeout(lv, journaled);
      await guard.clear(dom.uuid);
    }
    await guard.resolve(dom.uuid);
    const thawed = r.outcome === 'thawed' ? r.thawedFilesystems : 0;
    jsonLogger({ host: config.host }).warn(`operator thaw of ${dom.name}`, { layer: 'operator', whose, thawed });
    emit(!!values.json, { domain: dom.name, before: wasFrozen ? 'frozen' : 'thawed', after: 'thawed', thawedFilesystems: thawed, thawedBy: 'operator', frozenBy: whose }, () =>
      `${dom.name}: ${wasFrozen ? 'frozen' : 'thawed'} → thawed (${thawed} filesystem(s) thawed; the freeze was ${whose})`,
    );
    return Exit.ok;
  } finally {
    await lv.close();
  }
}
