import { setTimeout as sleep } from 'node:timers/promises';
import { honourArrivals } from '../../safety/arrivals';
import { freezeGuardFor } from '../../safety/guard-for';
import { isNoDomain, LibvirtClient } from '../../libvirt';
import { DOMAIN_UUID } from '../../model/input';
import { configFrom, onePositional } from '../config-flags';
import { parseCommand } from '../options';
import { ARRIVAL_GUARD } from '../specs/thaw';
import { CliError, Exit } from '../exit-codes';
import { jsonLogger } from '../../worker/logger';

/** How often it looks while the guest is still arriving (paused, or not yet defined here). */
const LOOK_MS = 1000;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(ARRIVAL_GUARD, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  const uuid = onePositional(parsed.positionals, 'arrival-guard', 'domain uuid');
  if (!DOMAIN_UUID.test(uuid)) throw new CliError(`invalid domain uuid "${uuid}"`, Exit.badInput);
  const config = configFrom(values);
  const log = jsonLogger({ host: config.host, component: 'arrival-guard', domainUuid: uuid });
  const guard = freezeGuardFor(config, (m, f) => log.error(m, f));
  const maxMs = Number(process.env.VMSNAP_ARRIVAL_GUARD_MAX_MS ?? 3600_000);
  const until = Date.now() + (Number.isFinite(maxMs) && maxMs > 0 ? maxMs : 3600_000);
  let lv: LibvirtClient | undefined;
  const libvirt = async () => (lv ??= await LibvirtClient.connect({ uri: config.libvirt.uri, callTimeoutMs: 30_000 }));
  let seen = false;
  log.info('arrival guard started', {});
  try {
    while (Date.now() < until) {
      try {
        const open = await guard.obligationOf(uuid);
        if (!open) {
          log.info('no open freeze obligation for the guest: nothing to do', {});
          return Exit.ok;
        }
        const c = await libvirt();
        const here = await c.lookupDomainByUuid(uuid).then(
          () => true,
          (err: unknown) => {
            if (isNoDomain(err)) return false;
            throw err;
          },
        );
        // Gone again after it arrived (a migration that went on, or was rolled back): not ours.
        if (!here && seen) return Exit.ok;
        seen ||= here;
        const pass = await honourArrivals({ libvirt, guard, clockSkewMs: config.clockSkewMs, log: (level, m, f) => log[level](m, f) }, uuid);
        if (pass.honoured.length) return Exit.ok;
        if (pass.nextDueAt !== undefined) {
          await sleep(Math.max(0, Math.min(pass.nextDueAt - Date.now(), 60_000)) + 20);
          continue;
        }
      } catch (err) {
        // Ceph or libvirtd away for now: a freeze owed a thaw is not given up on that.
        log.warn('arrival guard: not this time; looking again', { error: err instanceof Error ? err.message : String(err) });
        await lv?.close().catch(() => undefined);
        lv = undefined;
      }
      await sleep(LOOK_MS);
    }
    log.error('arrival guard gave up waiting (VMSNAP_ARRIVAL_GUARD_MAX_MS); the worker\'s sweeper still honours the obligation', {});
    return Exit.failed;
  } finally {
    await lv?.close().catch(() => undefined);
  }
}
