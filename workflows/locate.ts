import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FLEET_TASK_QUEUE, placeDomain } from '../src/model/fleet';
import type { Placement, Presence } from '../src/model/fleet';

/** Registry reads and fleet bookkeeping: any worker of the fleet queue. */
export const fleetOps = () =>
  proxyActivities<Activities>({
    taskQueue: FLEET_TASK_QUEUE,
    startToCloseTimeout: '10s',
    retry: { maximumAttempts: 5, initialInterval: '500ms', maximumInterval: '5s' },
  });

/** One host's answer, or none: a host that cannot take the task within 5 s is not waited for. */
const presenceOn = (taskQueue: string) =>
  proxyActivities<Activities>({ taskQueue, scheduleToCloseTimeout: '5s', retry: { maximumAttempts: 1 } });

/**
 * Where the domain runs now: every live or recently lost host is asked at once (its own libvirtd
 * is the truth; the registry's domain list may be one beat old), and placeDomain judges the
 * answers. A host that does not answer within 5 s makes "not found" a guess, never a verdict.
 */
export async function locate(domain: string): Promise<Placement> {
  const { answers, unanswered } = await askHosts(domain);
  return placeDomain(domain, answers, unanswered);
}

/** Every host worth asking (not draining) answers whether it has the domain (a name or a UUID). */
export async function askHosts(domain: string): Promise<{ answers: Presence[]; unanswered: string[] }> {
  // A draining host (its worker stopping or restarting) is not asked: for a run, "not found" then
  // fails as it did when a stopped host left the registry; a freeze's hand-off keeps looking anyway.
  const live = (await fleetOps().fleetHosts()).filter((h) => h.ask);
  const settled = await Promise.allSettled(
    live.map((h) => presenceOn(h.taskQueue).domainPresence.executeWithOptions({ summary: `is ${domain} on ${h.host}?` }, [{ domain, taskQueue: h.taskQueue }])),
  );
  const answers: Presence[] = [];
  const unanswered: string[] = [];
  // A lost host that answers counts (its beat was only late); one that does not is lost indeed,
  // and cannot be where a run would go. Only a live host's silence leaves the placement unsure.
  settled.forEach((s, i) => (s.status === 'fulfilled' ? answers.push(s.value) : live[i].alive && unanswered.push(live[i].host)));
  return { answers, unanswered };
}
