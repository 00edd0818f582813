/**
 * The fleet's index: one entry workflow per host (`vmsnap-host-<host>`) holds that host's last
 * beat and publishes, as search attributes, which domains it has (VmsnapDomains) and how it is
 * (VmsnapHostState). Temporal's visibility store answers "which host has vm-42" for every run,
 * so no workflow hears every host and no run asks every host. Pure logic here: the entry
 * workflow, the readers and the CLI share it.
 */
import { DEFAULT_HOST_LOST_AFTER_MS, LOST_AFTER_INTERVALS, hostState } from './fleet';
import type { FleetHost, HostState } from './fleet';

/** The workflow type of a host's entry; its id is hostEntryId(host). */
export const HOST_ENTRY_TYPE = 'fleetHostEntry';

export function hostEntryId(host: string): string {
  return `vmsnap-host-${host}`;
}

/** Domain names that go into a visibility query as they are; any other is indexed by its hash. */
const SAFE_NAME = /^[A-Za-z0-9._:+@-]{1,128}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * FNV-1a, 64 bits, over UTF-16 code units: a name with quotes or spaces never reaches a query string, and a hash the
 * workflow computes (no crypto in the workflow sandbox) is the same in every worker.
 */
function fnv1a64(s: string): string {
  let h = 0xcbf29ce484222325n;
  for (let i = 0; i < s.length; i++) {
    h ^= BigInt(s.charCodeAt(i));
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, '0');
}

/** The index key of a domain name. */
export function nameKey(name: string): string {
  return SAFE_NAME.test(name) ? `n:${name}` : `h:${fnv1a64(name)}`;
}

/** The keys a host publishes for a domain it has: its name's and its UUID's. */
export function domainKeys(d: { name: string; uuid: string }): string[] {
  return [nameKey(d.name), `u:${d.uuid.toLowerCase()}`];
}

/** The keys that find what a run names (a name, or a UUID, which libvirt also accepts as a name lookup). */
export function lookupKeys(nameOrUuid: string): string[] {
  return UUID.test(nameOrUuid) ? [`u:${nameOrUuid.toLowerCase()}`, nameKey(nameOrUuid)] : [nameKey(nameOrUuid)];
}

/** A host's whole index, sorted, deduplicated: what the entry upserts when it changes. */
export function indexOf(h: Pick<FleetHost, 'domains'> & { defined?: { name: string; uuid: string }[] }): string[] {
  return [...new Set([...h.domains, ...(h.defined ?? [])].flatMap(domainKeys))].sort();
}

/** Visibility queries: only these strings (keys are SAFE_NAME, a hex hash or a UUID) reach one. */
const RUNNING_ENTRIES = `WorkflowType = '${HOST_ENTRY_TYPE}' AND ExecutionStatus = 'Running'`;

export function entriesWithDomain(nameOrUuid: string): string {
  return `${RUNNING_ENTRIES} AND VmsnapDomains IN (${lookupKeys(nameOrUuid).map((k) => `'${k}'`).join(', ')})`;
}

/**
 * One visibility call per placement: the entries that have the domain, and the late or draining
 * ones (whose published domains may be stale). Temporal rate-limits visibility per namespace
 * (frontend.namespaceRPS.visibility), so a run makes one such call, never one per host.
 */
export function placementQuery(nameOrUuid: string): string {
  const keys = lookupKeys(nameOrUuid).map((k) => `'${k}'`).join(', ');
  return `${RUNNING_ENTRIES} AND (VmsnapDomains IN (${keys}) OR VmsnapHostState IN ('late', 'draining'))`;
}

export function entriesInState(states: readonly HostState[]): string {
  return `${RUNNING_ENTRIES} AND VmsnapHostState IN (${states.map((s) => `'${s}'`).join(', ')})`;
}

export const ALL_ENTRIES = RUNNING_ENTRIES;

/**
 * When the entry's published state next changes if no beat comes: alive → late after
 * LOST_AFTER_INTERVALS intervals, late or draining → lost at the host's threshold, lost → the
 * entry ends after a day. `undefined`: nothing more to wait for.
 */
export function nextStateChangeAt(h: FleetHost, now: number, forgetAfterMs: number): number | undefined {
  const s = hostState(h, now);
  const after = h.lostAfterMs ?? DEFAULT_HOST_LOST_AFTER_MS;
  if (s === 'alive') return h.seenAt + LOST_AFTER_INTERVALS * h.intervalMs + 1;
  if (s === 'late') return h.seenAt + after + 1;
  if (s === 'draining') return h.seenAt + 3 * after + 1;
  const forgetAt = h.seenAt + forgetAfterMs;
  return forgetAt > now ? forgetAt : undefined;
}

/** How many late or draining hosts a placement asks besides the ones the index names. */
export const UNSURE_HOSTS_ASKED = 8;
