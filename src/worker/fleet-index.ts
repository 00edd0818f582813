import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { FLEET_REGISTRY_ID, HOST_STATES, isLost } from '../model/fleet';
import type { FleetHost } from '../model/fleet';
import { ALL_ENTRIES, UNSURE_HOSTS_ASKED, entriesInState, hostEntryId, lookupKeys, placementQuery } from '../model/fleet-index';
import { SA } from '../model/search-attributes';

/**
 * Reads of the fleet index (workflows/fleet-host.ts): Temporal's visibility store says which
 * hosts have a domain, each entry's query gives that host's last beat. Used by the fleet
 * activities, `vmsnap fleet`, doctor and /metrics.
 */

/** One host's last beat, or undefined (never announced, retired, or its entry ended). */
export async function readHost(client: Client, host: string): Promise<FleetHost | undefined> {
  try {
    return (await client.workflow.getHandle(hostEntryId(host)).query<FleetHost | null>('host')) ?? undefined;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** The hosts whose running entries match `query`, at most `limit` (visibility order). */
async function entryHosts(client: Client, query: string, limit: number): Promise<string[]> {
  const out: string[] = [];
  for await (const wf of client.workflow.list({ query, pageSize: Math.min(limit, 1000) })) {
    out.push(wf.workflowId.replace(/^vmsnap-host-/, ''));
    if (out.length >= limit) break;
  }
  return out;
}

async function records(client: Client, hosts: readonly string[]): Promise<FleetHost[]> {
  const out: FleetHost[] = [];
  // Bounded concurrency: `vmsnap fleet hosts` on a large fleet must not open a query per host at once.
  for (let i = 0; i < hosts.length; i += 32) {
    const got = await Promise.all(hosts.slice(i, i + 32).map((h) => readHost(client, h)));
    for (const h of got) if (h) out.push(h);
  }
  return out;
}

/**
 * Where a domain may be: the hosts the index names for it, plus up to UNSURE_HOSTS_ASKED late or
 * draining hosts (their published domains may be stale); `silent` names the late or draining
 * hosts beyond those, whose silence alone leaves "not found" unsure; `live` counts alive hosts
 * when the index names none (0: no host at all).
 */
export async function placementCandidates(client: Client, domain: string): Promise<{ hosts: FleetHost[]; silent: string[]; live?: number }> {
  const keys = new Set(lookupKeys(domain));
  const named: string[] = [];
  const unsure: string[] = [];
  const [, legacy] = await Promise.all([
    (async () => {
      for await (const wf of client.workflow.list({ query: placementQuery(domain), pageSize: 100 })) {
        const host = wf.workflowId.replace(/^vmsnap-host-/, '');
        if ((wf.typedSearchAttributes.get(SA.domains) ?? []).some((k) => keys.has(k))) named.push(host);
        else unsure.push(host);
        if (named.length + unsure.length >= 100) break;
      }
    })(),
    legacyHosts(client),
  ]);
  const asked = [...named, ...unsure.slice(0, UNSURE_HOSTS_ASKED)];
  const found = await records(client, asked);
  const indexed = new Set([...named, ...unsure]);
  // Hosts still on the registry of releases before the index (a rolling upgrade): asked as then.
  const old = legacy.filter((h) => !indexed.has(h.host) && h.domains.some((d) => d.name === domain || d.uuid === domain.toLowerCase()));
  const hosts = [...found, ...old];
  // Only when nothing names it: "not found among N live hosts" or "no host at all".
  const live = hosts.length ? undefined : (await client.workflow.count(entriesInState(['alive']))).count + legacy.length;
  return { hosts, silent: unsure.slice(UNSURE_HOSTS_ASKED), ...(live !== undefined ? { live } : {}) };
}

/** Every host of the fleet (O(hosts): `vmsnap fleet hosts`, doctor, restore's room, the reaper's disk question). */
export async function listHosts(client: Client): Promise<FleetHost[]> {
  const [hosts, legacy] = await Promise.all([entryHosts(client, ALL_ENTRIES, 100_000), legacyHosts(client)]);
  const found = await records(client, hosts);
  const have = new Set(found.map((h) => h.host));
  return [...found, ...legacy.filter((h) => !have.has(h.host))].sort((a, b) => a.host.localeCompare(b.host));
}

/** How many hosts are in each state (`vmsnap fleet hosts`, the bench): 4 visibility calls. */
export async function countHosts(client: Client): Promise<Record<'alive' | 'late' | 'draining' | 'lost', number>> {
  const counts = await Promise.all(HOST_STATES.map((s) => client.workflow.count(entriesInState([s]))));
  return Object.fromEntries(HOST_STATES.map((s, i) => [s, counts[i]!.count])) as Record<(typeof HOST_STATES)[number], number>;
}

/**
 * The hosts on the registry workflow of releases before the index, while it runs: the hosts not
 * yet upgraded still beat into it. Read at most every 30 s per worker; once every host it holds
 * has moved to the index or is lost, it is ended (it would otherwise idle forever).
 */
let legacy: { at: number; hosts: Promise<FleetHost[]> } | undefined;

export function legacyHosts(client: Client, now = Date.now()): Promise<FleetHost[]> {
  if (!legacy || now - legacy.at > 30_000) {
    const read = { at: now, hosts: readLegacy(client, now) };
    legacy = read;
    // A failed read is not kept for 30 s: the next caller tries again.
    read.hosts.catch(() => {
      if (legacy === read) legacy = undefined;
    });
  }
  return legacy.hosts;
}

async function readLegacy(client: Client, now: number): Promise<FleetHost[]> {
  try {
    const handle = client.workflow.getHandle(FLEET_REGISTRY_ID);
    if ((await handle.describe()).status.name !== 'RUNNING') return [];
    const held = await handle.query<FleetHost[]>('fleet');
    // Moved = its entry has published (domains and state come in one upsert): an entry started but
    // not yet through its first beat would otherwise end the registry while nothing names the VM.
    const moved = new Set(await entryHosts(client, entriesInState(HOST_STATES), 100_000).catch(() => [] as string[]));
    const left = held.filter((h) => !moved.has(h.host) && !isLost(h, now));
    if (!left.length) await handle.terminate('every host of this registry moved to the fleet index (vmsnap-host-<host>)').catch(() => undefined);
    return left;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return [];
    throw err;
  }
}

/** Tests: forget the cached read of the legacy registry. */
export function forgetLegacyRead(): void {
  legacy = undefined;
}
