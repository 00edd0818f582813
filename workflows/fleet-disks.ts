import { judgeAnswers } from '../src/model/fleet';
import { definedOn, fleetOps } from './activity-profiles';


/**
 * Before a host's reaper removes disks it made, every other host that is not lost says whether a
 * domain defined there uses one: a VM kept from an unfinished restore may have moved and be shut
 * off anywhere. Only a lost host's silence is ruled out (judgeAnswers, as for placement).
 */
export async function fleetDisksInUse(req: { disks: string[]; askingHost: string }): Promise<{ used: { disk: string; domain: string; host: string }[]; unanswered: string[] }> {
  const hosts = (await fleetOps().fleetHosts()).filter((h) => h.host !== req.askingHost);
  const asked = hosts.filter((h) => h.ask);
  const settled = await Promise.allSettled(
    asked.map((h) =>
      definedOn(h.taskQueue)
        .rbdDisksDefinedHere.executeWithOptions({ summary: `does ${h.host} use ${req.disks.length} disk(s)?` }, [{ disks: req.disks }])
        .then((used) => used.map((u) => ({ ...u, host: h.host }))),
    ),
  );
  const { answers, unanswered } = judgeAnswers(hosts, settled.map((s) => (s.status === 'fulfilled' ? s.value : undefined)));
  return { used: answers.flat(), unanswered };
}
