import { connectLibvirt } from '../libvirt-session';
import { FreezeGuard } from '../../host/freeze-guard';
import { DOMAIN_NAME, DOMAIN_UUID } from '../../model/input';
import { COMMON_HELP, configFrom, parseSingle } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { jsonLogger } from '../../worker/logger';

const HELP = `Usage: vmsnap thaw <domain>

Emergency thaw, straight through this host's libvirt (no Temporal needed): virDomainFSThaw, then
guest-fsfreeze-status until "thawed". Clears vmsnap's journal entry for the guest.
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseSingle(argv, HELP, 'thaw', 'domain');
  if (!parsed) return Exit.ok;
  const { values, arg: name } = parsed;
  if (!DOMAIN_NAME.test(name) && !DOMAIN_UUID.test(name)) throw new CliError(`invalid domain "${name}"`, Exit.badInput);
  const config = configFrom(values);
  const lv = await connectLibvirt(config.libvirt.uri);
  try {
    const dom = await lv.lookupDomain(name).catch((err: Error) => {
      throw new CliError(`no domain ${name}: ${err.message}`, Exit.badInput);
    });
    const before = await lv.fsFreezeStatus(dom, 5);
    const thawed = await lv.fsThaw(dom);
    const after = await lv.fsFreezeStatus(dom, 5);
    const guard = new FreezeGuard({ libvirtUri: config.libvirt.uri, stateDir: config.stateDir });
    if (after === 'thawed') {
      await guard.release(dom.uuid);
      await guard.clear(dom.uuid);
    }
    jsonLogger({ host: config.host }).warn(`operator thaw of ${dom.name}`, { layer: 'operator', before, after, thawed });
    emit(!!values.json, { domain: dom.name, before, after, thawedFilesystems: thawed, thawedBy: 'operator' }, () =>
      `${dom.name}: ${before} → ${after} (${thawed} filesystem(s) thawed)`,
    );
    return after === 'thawed' ? Exit.ok : Exit.failed;
  } finally {
    await lv.close();
  }
}
