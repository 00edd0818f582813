import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { hostState, secondsSinceSeen } from '../../model/fleet';
import type { FleetHost } from '../../model/fleet';
import { hostEntryId } from '../../model/fleet-index';
import { HOST_ID } from '../../model/input';
import { listHosts, readHost } from '../../worker/fleet-index';
import { configFrom, onePositional } from '../config-flags';
import { parseCommand, pickSubcommand } from '../options';
import { FLEET } from '../specs/fleet';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { withClient } from '../temporal-client';

export async function run(argv: string[]): Promise<number> {
  const picked = pickSubcommand(FLEET, argv);
  if (!picked) return Exit.ok;
  const parsed = parseCommand(picked.sub, picked.rest);
  if (!parsed) return Exit.ok;
  const { values, positionals } = parsed;
  if (picked.sub === FLEET.subcommands.hosts) {
    if (positionals.length) throw new CliError('fleet hosts takes no arguments', Exit.badInput);
    return withClient(configFrom(values), (c) => hosts(c, !!values.json));
  }
  const host = onePositional(positionals, 'fleet forget', 'host id');
  if (!HOST_ID.test(host)) throw new CliError(`invalid host id "${host}"`, Exit.badInput);
  return withClient(configFrom(values), (c) => forget(c, host, !!values.json));
}

async function registry(client: Client): Promise<FleetHost[]> {
  try {
    return await listHosts(client);
  } catch (err) {
    throw new CliError(`cannot read the fleet index: ${(err as Error).message} (a worker of any host answers it: is one running?)`, Exit.unreachable);
  }
}

async function entry(client: Client, host: string): Promise<FleetHost | undefined> {
  try {
    return await readHost(client, host);
  } catch (err) {
    throw new CliError(`cannot read ${hostEntryId(host)}: ${(err as Error).message} (a worker of any host answers it: is one running?)`, Exit.unreachable);
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
  emit(json, rows, () => (rows.length ? rows.map((r) => `${r.host}\t${r.state}\tlast seen ${r.lastSeenSecondsAgo} s ago\t${r.vms.join(', ') || 'no running VM'}`).join('\n') : 'the fleet index knows no host'));
  return Exit.ok;
}

async function forget(client: Client, host: string, json: boolean): Promise<number> {
  const before = await entry(client, host).catch((err: unknown) => err as CliError);
  if (before instanceof CliError) {
    // No worker serves the fleet queue (the last host of a fleet, or all stopped): the request
    // waits in the entry's history, and the entry applies the same rule (never a host that still
    // beats) when a worker next runs it.
    if (!(await requestForget(client, host))) throw new CliError(`the fleet index knows no host "${host}"`, Exit.badInput);
    emit(json, { host, forgotten: 'requested' }, () => `${host}: retirement requested; no worker answers the fleet index now, so it is applied when one next runs (not if ${host} beats again by then)`);
    return Exit.ok;
  }
  if (!before) throw new CliError(`the fleet index knows no host "${host}"`, Exit.badInput);
  const was = hostState(before, Date.now());
  if (was === 'alive') {
    throw new CliError(`${host} still beats (last seen ${secondsSinceSeen(before, Date.now())} s ago): stop its worker first, or it rejoins at its next beat`, Exit.badInput);
  }
  await requestForget(client, host);
  // The registry judges "still beats" on its own clock, and a beat may land in between: confirm.
  for (let i = 0; i < 50; i++) {
    const now = await entry(client, host);
    if (!now) {
      emit(json, { host, forgotten: true, was }, () => `${host} (${was}) retired from the fleet`);
      return Exit.ok;
    }
    if (now.seenAt !== before.seenAt) throw new CliError(`${host} beat again while being forgotten: its worker runs`, Exit.failed);
    await sleep(200);
  }
  throw new CliError(`${host} is still in the fleet index 10 s after the request (is a worker serving the fleet queue?)`, Exit.failed);
}

/** The entry applies it by its own rule (never a host that still beats), now or when next run; false: no entry. */
async function requestForget(client: Client, host: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(hostEntryId(host)).signal('hostForgotten', { host });
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}
