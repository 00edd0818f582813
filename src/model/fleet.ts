/**
 * The fleet: which hypervisor hosts exist, which of them are alive, and where a VM runs now.
 * Hosts announce themselves (a heartbeat signal to their own entry in the fleet index,
 * fleet-index.ts); nobody keeps a list by hand. Pure logic here: the entries, the router and the
 * CLI all judge liveness and placement with these functions.
 */

/** The task queue every worker polls besides its own: location-transparent runs start here. */
export const FLEET_TASK_QUEUE = 'vmsnap';

/** The one registry workflow per namespace of releases before the fleet index (read during a rolling upgrade). */
export const FLEET_REGISTRY_ID = 'vmsnap-fleet';

/** A heartbeat: what one host's worker says about itself. */
export interface HostBeat {
  host: string;
  taskQueue: string;
  /** Worker identity (`vmsnap@host/pid`): a restart shows as a new identity. */
  identity: string;
  /** Worker clock, ms since epoch, when the beat was sent. */
  sentAt: number;
  /** How often this host beats; liveness is judged against its own interval. */
  intervalMs: number;
  /** Running domains on this host (libvirt's view when the beat was sent). */
  domains: { name: string; uuid: string }[];
  /** Shut-off domains defined here (indexed, so a run of one fails DomainNotRunning); absent before the index. */
  defined?: { name: string; uuid: string }[];
  /** This host's loss threshold (config fleetHostLostAfterMs); absent in beats of older releases. */
  lostAfterMs?: number;
}

/** A host as the registry holds it: the last beat, and when the registry received it. */
export interface FleetHost extends HostBeat {
  /** Registry (workflow task) time of the last beat, ms since epoch. */
  seenAt: number;
  /** Number of beats received since the host first announced itself (or since its last restart). */
  beats: number;
  /** Its worker said it is stopping (a clean stop: a restart, maintenance): "back soon", not gone. */
  drainingSince?: number;
}

/** A worker's identity (Temporal's, and the registry's test of "the worker that beat last"). */
export function workerIdentity(host: string, pid: number): string {
  return `vmsnap@${host}/${pid}`;
}

/** What a host sends when it stops: draining ("back soon"), or retired `forGood`. */
export interface HostLeave {
  host: string;
  /** The stopping worker's own identity: a host another worker serves by now is left alone. */
  identity: string;
  forGood?: boolean;
}

export function hostLeave(host: string, identity: string, forGood = false): HostLeave {
  return { host, identity, ...(forGood ? { forGood } : {}) };
}

/** Whole seconds since the registry last heard the host (doctor, `fleet hosts`, the metric). */
export function secondsSinceSeen(h: Pick<FleetHost, 'seenAt'>, now: number): number {
  return Math.round((now - h.seenAt) / 1000);
}

/** A host is no longer asked where a VM runs after this many of its own intervals without a beat. */
export const LOST_AFTER_INTERVALS = 3;

/** Beating: worth asking, its answers count. A draining host is not asked (its worker is stopping or stopped). */
export function isAlive(h: Pick<FleetHost, 'seenAt' | 'intervalMs'> & { drainingSince?: number }, now: number): boolean {
  return h.drainingSince === undefined && now - h.seenAt <= LOST_AFTER_INTERVALS * h.intervalMs;
}

/** The default of config fleetHostLostAfterMs, for beats of releases that did not send theirs. */
export const DEFAULT_HOST_LOST_AFTER_MS = 600_000;

/**
 * Lost: only on a positive, long record of silence — its own threshold without a beat, three times
 * that after a clean stop. Only a lost host's routed runs are ended (their freezes handed over
 * first); a worker restart, a crash-loop that recovers, a slow deploy inside it loses nothing.
 */
export function isLost(h: Pick<FleetHost, 'seenAt'> & { lostAfterMs?: number; drainingSince?: number }, now: number): boolean {
  const after = h.lostAfterMs ?? DEFAULT_HOST_LOST_AFTER_MS;
  return now - h.seenAt > (h.drainingSince !== undefined ? 3 * after : after);
}

/**
 * One word for an operator (doctor, `vmsnap fleet hosts`): alive (beating); draining (its worker
 * stopped cleanly, "back soon"); late (beats missing, not yet lost); lost. Only a lost host's
 * silence rules it out as where a VM runs; a draining or late one leaves "not running" unsure.
 */
export const HOST_STATES = ['alive', 'draining', 'late', 'lost'] as const;
export type HostState = (typeof HOST_STATES)[number];

export function hostState(h: Pick<FleetHost, 'seenAt' | 'intervalMs'> & { lostAfterMs?: number; drainingSince?: number }, now: number): HostState {
  if (isLost(h, now)) return 'lost';
  if (h.drainingSince !== undefined) return 'draining';
  return isAlive(h, now) ? 'alive' : 'late';
}

/** How often a router looks at its run's host: sooner than a quarter of the threshold is waste. */
export function hostWatchMs(h: { lostAfterMs?: number } | undefined): number {
  return Math.max(3000, Math.min(60_000, Math.floor((h?.lostAfterMs ?? DEFAULT_HOST_LOST_AFTER_MS) / 4)));
}

/** A clean stop: the host stays known, as draining, until it beats again or is lost. */
export function applyDrain(hosts: Record<string, FleetHost>, host: string, identity: string, now: number): Record<string, FleetHost> {
  const h = hosts[host];
  // Only the worker that beat last may say its host drains (a restarted one has a new identity).
  if (!h || h.identity !== identity) return hosts;
  return { ...hosts, [host]: { ...h, drainingSince: now } };
}

/**
 * A host retired for good: its worker said so as it stopped (a one-shot worker, a decommissioned
 * host), or an operator did (`vmsnap fleet forget`). Kept, a stopped host's silence would leave
 * every "not running anywhere" unsure until it is lost (3× its threshold after a clean stop).
 * `identity` set: only the worker that beat last may retire its host. Unset (the operator): never
 * a host that still beats, which would only come back at its next beat while its runs lose their
 * placement in between.
 */
export function applyRetire(hosts: Record<string, FleetHost>, host: string, by: { identity: string } | { now: number }): Record<string, FleetHost> {
  const h = hosts[host];
  if (!h) return hosts;
  if ('identity' in by ? h.identity !== by.identity : isAlive(h, by.now)) return hosts;
  const rest = { ...hosts };
  delete rest[host];
  return rest;
}

/**
 * Hosts lost this recently are still asked where a VM runs: a beat can be late while the host
 * works (libvirtd is slow to list domains during a migration), and a VM must not be reported
 * "not found" because its host's last beat was.
 */
export const ASK_LOST_FOR_MS = 5 * 60_000;

export function isWorthAsking(h: Pick<FleetHost, 'seenAt' | 'intervalMs'>, now: number): boolean {
  return isAlive(h, now) || now - h.seenAt <= ASK_LOST_FOR_MS;
}

/** A host's view of one domain, as the locate step asks every live host. */
/** `roomKiB`, when asked for: memory a new VM may take there (available minus the host's reserve). */
export type Presence =
  | { host: string; taskQueue: string; found: false; roomKiB?: number }
  | { host: string; taskQueue: string; found: true; uuid: string; name: string; state: string; roomKiB?: number };

export type Placement =
  | { ok: true; host: string; taskQueue: string; uuid: string; name: string }
  /** Not running anywhere; `definedOn` lists hosts that know it (shut off there). */
  | { ok: false; why: 'not-found' | 'not-running' | 'ambiguous' | 'no-hosts' | 'unanswered'; message: string; definedOn: string[] };

/**
 * Where the domain runs now. Exactly one host must say `running`. During a live migration the
 * destination holds it `paused` (incoming) while the source says `running`: the source is where
 * it runs. Two `running` answers (a split brain, or two VMs of one name on two hosts) are not
 * guessed between.
 */
export function placeDomain(domain: string, answers: Presence[], unanswered: string[] = []): Placement {
  if (answers.length === 0 && unanswered.length === 0) return { ok: false, why: 'no-hosts', message: 'no live vmsnap host in the fleet (no worker has announced itself recently)', definedOn: [] };
  const found = answers.filter((a): a is Extract<Presence, { found: true }> => a.found);
  const running = found.filter((a) => a.state === 'running');
  if (running.length === 1) {
    const r = running[0];
    return { ok: true, host: r.host, taskQueue: r.taskQueue, uuid: r.uuid, name: r.name };
  }
  const definedOn = found.map((a) => a.host).sort();
  // A live host that did not answer may be the one running it: "not found" would be a guess.
  if (running.length === 0 && unanswered.length) {
    return { ok: false, why: 'unanswered', message: `domain ${domain} is not running on the hosts that answered; ${silentHosts(unanswered)}`, definedOn };
  }
  if (running.length > 1) {
    return { ok: false, why: 'ambiguous', message: `domain ${domain} is running on ${running.map((r) => r.host).sort().join(' and ')}`, definedOn };
  }
  if (found.length) {
    return {
      ok: false,
      why: 'not-running',
      message: `domain ${domain} is not running on any live host (${found.map((a) => `${a.host}: ${a.state}`).sort().join(', ')})`,
      definedOn,
    };
  }
  return { ok: false, why: 'not-found', message: `domain ${domain} exists on none of the live hosts (${answers.map((a) => a.host).sort().join(', ')})`, definedOn };
}

/** The hosts whose silence leaves a placement unsure, and what an operator does about one gone for good. */
export function silentHosts(unanswered: readonly string[]): string {
  const sorted = [...unanswered].sort();
  return `${sorted.join(', ')} did not answer (one whose worker is gone for good: vmsnap fleet forget ${sorted[0]})`;
}

/** A registry host as the fleetHosts activity returns it: judged at read time. */
export interface JudgedHost {
  host: string;
  /** Asked where a VM runs (alive, or late but not draining). */
  ask: boolean;
  alive: boolean;
  lost: boolean;
}

/**
 * The hosts' answers, and the hosts whose silence leaves "not there" unsure. Only a lost host (a
 * positive, long record of silence) is ruled out: one that is late, draining for a restart or not
 * asked for being late may be where the VM runs, so a run looks again and fails retryable
 * (DomainNotPlaced), never DomainNotFound, and a hand-off keeps looking. `aliveOnly` is the rule
 * of histories before that (only an alive host's silence counted; unasked hosts were ignored).
 */
export function judgeAnswers<A = Presence>(
  hosts: readonly JudgedHost[],
  asked: readonly (A | undefined)[],
  aliveOnly = false,
): { answers: A[]; unanswered: string[] } {
  const answers: A[] = [];
  const unanswered: string[] = [];
  const queried = hosts.filter((h) => h.ask);
  queried.forEach((h, i) => {
    const a = asked[i];
    if (a) answers.push(a);
    else if (aliveOnly ? h.alive : !h.lost) unanswered.push(h.host);
  });
  if (!aliveOnly) for (const h of hosts) if (!h.ask && !h.lost) unanswered.push(h.host);
  return { answers, unanswered };
}

/** Merges a beat into the registry's map; a beat older than the one held is ignored. */
export function applyBeat(hosts: Record<string, FleetHost>, beat: HostBeat, seenAt: number): Record<string, FleetHost> {
  const prev = hosts[beat.host];
  if (prev && prev.identity === beat.identity && prev.sentAt > beat.sentAt) return hosts;
  const beats = prev && prev.identity === beat.identity ? prev.beats + 1 : 1;
  // A beat ends a drain: the host (restarted or not) serves again.
  return { ...hosts, [beat.host]: { ...beat, seenAt, beats } };
}

/** Hosts not heard of for this long are dropped from the registry (kept as lost until then). */
export const FORGET_AFTER_MS = 24 * 3600_000;

export function forgetStale(hosts: Record<string, FleetHost>, now: number): Record<string, FleetHost> {
  const out: Record<string, FleetHost> = {};
  for (const [k, h] of Object.entries(hosts)) if (now - h.seenAt <= FORGET_AFTER_MS) out[k] = h;
  return out;
}

/** Bounded re-locations of one run: a VM that keeps moving fails the run (retryable) instead of looping. */
export const MAX_RELOCATIONS = 3;

/** A move the router saw: the run went to `from`, the VM was no longer there. */
export interface Relocation {
  from: string;
  reason: string;
}
