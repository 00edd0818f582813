import { patched, sleep } from '@temporalio/workflow';
import { fleetOps, presenceOn } from './activity-profiles';
import { judgeAnswers, placeDomain } from '../src/model/fleet';
import type { Placement, Presence } from '../src/model/fleet';

/**
 * Where the domain runs now: the hosts the fleet index names for it, and a bounded few whose
 * index may be stale (late, draining), are asked at once — their own libvirtd is the truth; the
 * index may be a beat old — and placeDomain judges the answers. A host that does not answer
 * within 5 s makes "not found" a guess, never a verdict. With `relook` (a caller that gives up on
 * "not found"), it is looked at once more 2 s later: a VM that just migrated is in its new host's
 * index within a second or two (its beat looks at libvirt every second); callers that keep
 * looking anyway (the hand-off) do not wait. Histories from before the index asked every host.
 */
export async function locate(domain: string, opts: { relook?: boolean } = {}): Promise<Placement> {
  if (!patched(FLEET_INDEX)) {
    const { answers, unanswered } = await askHosts(domain);
    return placeDomain(domain, answers, unanswered);
  }
  for (let look = 0; ; look++) {
    const p = await lookIndexed(domain);
    if (p.ok || p.why !== 'not-found' || look > 0 || !opts.relook) return p;
    await sleep(2000);
  }
}

/** Every host before the fleet index (O(hosts) per look); retire 2027-06-01 with the legacy registry read. */
const FLEET_INDEX = 'vmsnap-fleet-index';

async function lookIndexed(domain: string): Promise<Placement> {
  const c = await fleetOps().placementCandidates({ domain });
  const asked = await Promise.allSettled(c.hosts.filter((h) => h.ask).map((h) => presence(h, domain)));
  const judged = judgeAnswers(c.hosts, asked.map((s) => (s.status === 'fulfilled' ? s.value : undefined)));
  const unanswered = [...judged.unanswered, ...c.silent];
  if (!judged.answers.length && !unanswered.length) {
    if (!c.live) return placeDomain(domain, [], []);
    return { ok: false, why: 'not-found', message: `domain ${domain} exists on none of the ${c.live} live hosts (the fleet index names none)`, definedOn: [] };
  }
  return placeDomain(domain, judged.answers, unanswered);
}

function presence(h: { host: string; taskQueue: string }, domain: string, room = false): Promise<Presence> {
  return presenceOn(h.taskQueue).domainPresence.executeWithOptions({ summary: `is ${domain} on ${h.host}?` }, [{ domain, taskQueue: h.taskQueue, ...(room ? { withRoom: true } : {}) }]);
}

/** Extra looks (2 s apart) while a placement is unsure, before a router gives up. */
const LOOK_RETRIES = 5;

/**
 * Asks again, 2 s apart and at most LOOK_RETRIES more times, while the answer is unsure (a host
 * did not answer, two said running, none known yet): both routers' patience, written once.
 */
export async function lookUntilSure<P>(look: () => Promise<P>, unsure: (p: P) => boolean, retries = LOOK_RETRIES): Promise<P> {
  let p = await look();
  for (let again = 0; unsure(p) && again < retries; again++) {
    await sleep(2000);
    p = await look();
  }
  return p;
}

/**
 * Every host worth asking (not draining) answers whether it has the domain (a name or a UUID);
 * with `room`, also how much memory a new VM may take there (restore's placement: O(hosts)).
 */
export async function askHosts(domain: string, room = false): Promise<{ answers: Presence[]; unanswered: string[] }> {
  // A draining host (its worker stopping or restarting) is not asked, but its silence, like that of
  // a late host, leaves "not found" unsure: only a lost one is ruled out (judgeAnswers).
  const hosts = await fleetOps().fleetHosts();
  const live = hosts.filter((h) => h.ask);
  const settled = await Promise.allSettled(live.map((h) => presence(h, domain, room)));
  const asked = settled.map((s) => (s.status === 'fulfilled' ? s.value : undefined));
  const judged = judgeAnswers(hosts, asked);
  const before = judgeAnswers(hosts, asked, true);
  // The marker only where the two rules differ: histories that never met a late host replay as they are.
  if (judged.unanswered.join() === before.unanswered.join() || patched(LATE_HOST_UNSURE)) return judged;
  return before;
}

/** Histories from before a late host's silence made placement unsure. Retire 2027-06-01. */
const LATE_HOST_UNSURE = 'vmsnap-late-host-unsure';
