import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { FLEET_REGISTRY_ID, hostState, secondsSinceSeen } from '../../model/fleet';
import type { FleetHost } from '../../model/fleet';
import { HOST_ID } from '../../model/input';
import { readFleet } from '../../worker/fleet-beat';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { withClient } from '../temporal-client';

const HELP = `Usage: vmsnap fleet <hosts|forget <host>> [options]

The fleet registry: every host whose worker announced itself in the last day.

  hosts           each host's state: alive, draining (its worker stopped cleanly), late (beats
                  missing) or lost, when it was last heard and the VMs it ran
  forget <host>   retire a host whose worker is gone for good (decommissioned, renamed). Until a
                  host is lost (fleetHostLostAfterMs of silence, 3x that after a clean stop) its
                  silence leaves "not running anywhere" unsure: runs of a VM no live host runs
                  fail DomainNotPlaced (retryable), and restores of a shut-off VM wait. Refused
                  while the host still beats. A retired host that starts its worker again rejoins.
                  With no worker answering the registry, the request waits for the next one.
${COMMON_HELP}`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {});
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
  const [sub, ...args] = positionals;
  if (sub === 'hosts' && args.length === 0) return withClient(configFrom(values), (c) => hosts(c, !!values.json));
  if (sub === 'forget' && args.length === 1) {
    const host = args[0]!;
    if (!HOST_ID.test(host)) throw new CliError(`invalid host id "${host}"`, Exit.badInput);
    return withClient(configFrom(values), (c) => forget(c, host, !!values.json));
  }
  throw new CliError(`fleet takes "hosts" or "forget <host>"\n\n${HELP}`, Exit.badInput);
}

async function registry(client: Client): Promise<FleetHost[]> {
  try {
    return await readFleet(client);
  } catch (err) {
    throw new CliError(`cannot read the fleet registry (${FLEET_REGISTRY_ID}): ${(err as Error).message} (a worker of any host answers it: is one running?)`, Exit.unreachable);
  }
}

async function hosts(client: Client, json: boolean): Promise<number> {
  const now = Date.now();
  const rows = (await registry(client)).map((h) => ({
    host: h.host,
    state: hostState(h, now),
    lastSeenSecondsAgo: secondsSinceSeen(h, now),
    taskQueue: h.taskQueue,
    vms: h.domains.map((d) => d.name).sort(),
  }));
  emit(json, rows, () => (rows.length ? rows.map((r) => `${r.host}\t${r.state}\tlast seen ${r.lastSeenSecondsAgo} s ago\t${r.vms.join(', ') || 'no running VM'}`).join('\n') : 'the registry knows no host'));
  return Exit.ok;
}

async function forget(client: Client, host: string, json: boolean): Promise<number> {
  const hosts = await registry(client).catch((err: unknown) => err as CliError);
  if (hosts instanceof CliError) {
    // No worker serves the registry (the last host of a fleet, or all stopped): the request waits
    // in its history, and the registry applies the same rule (never a host that still beats)
    // when a worker next runs it.
    await requestForget(client, host);
    emit(json, { host, forgotten: 'requested' }, () => `${host}: retirement requested; no worker answers the registry now, so it is applied when one next runs (not if ${host} beats again by then)`);
    return Exit.ok;
  }
  const before = hosts.find((h) => h.host === host);
  if (!before) throw new CliError(`the fleet registry knows no host "${host}"`, Exit.badInput);
  const was = hostState(before, Date.now());
  if (was === 'alive') {
    throw new CliError(`${host} still beats (last seen ${secondsSinceSeen(before, Date.now())} s ago): stop its worker first, or it rejoins at its next beat`, Exit.badInput);
  }
  await requestForget(client, host);
  // The registry judges "still beats" on its own clock, and a beat may land in between: confirm.
  for (let i = 0; i < 50; i++) {
    const now = (await registry(client)).find((h) => h.host === host);
    if (!now) {
      emit(json, { host, forgotten: true, was }, () => `${host} (${was}) retired from the fleet`);
      return Exit.ok;
    }
    if (now.seenAt !== before.seenAt) throw new CliError(`${host} beat again while being forgotten: its worker runs`, Exit.failed);
    await sleep(200);
  }
  throw new CliError(`${host} is still in the fleet registry 10 s after the request (is a worker serving the fleet queue?)`, Exit.failed);
}

/** The registry applies it by its own rule (never a host that still beats), now or when next run. */
function requestForget(client: Client, host: string): Promise<void> {
  return client.workflow.getHandle(FLEET_REGISTRY_ID).signal('hostForgotten', { host });
}
