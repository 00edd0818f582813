import { condition, defineQuery, makeContinueAsNewFunc, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { FORGET_AFTER_MS, applyBeat, applyDrain, applyRetire, hostState } from '../src/model/fleet';
import type { FleetHost } from '../src/model/fleet';
import { indexOf, nextStateChangeAt } from '../src/model/fleet-index';
import { SA } from '../src/model/search-attributes';
import { hostBeatSignal, hostForgottenSignal, hostLeftSignal } from './fleet-registry';

/** The host's last beat, judged by the reader; null once the host is retired. */
export const hostQuery = defineQuery<FleetHost | null>('host');

/** What the entry last published, carried across continue-as-new so an unchanged index is not upserted again. */
interface Published {
  index: string;
  state: string;
}

/**
 * One host's entry in the fleet index (id hostEntryId(host), on the fleet queue): its worker
 * signals-with-start every beat. It publishes the host's domains and state as search attributes
 * only when they change — the index readers query — so a beat that changes nothing is one signal
 * and one workflow task, and nothing here grows with the fleet. Retired (its worker said so, or an
 * operator did while it is silent), or lost for a day, the entry ends: closed entries are not in
 * the index. The next beat of the host starts a new one.
 */
export async function fleetHostEntry(state: { host?: FleetHost; published?: Published } = {}): Promise<void> {
  const me = workflowInfo().workflowId.replace(/^vmsnap-host-/, '');
  let hosts: Record<string, FleetHost> = state.host ? { [me]: state.host } : {};
  let retired = false;
  setHandler(hostBeatSignal, (beat) => {
    // Only this host's beats: an entry is the truth about one host.
    if (beat.host === me) hosts = applyBeat(hosts, beat, Date.now());
  });
  setHandler(hostLeftSignal, ({ host, identity, forGood }) => {
    if (host !== me) return;
    if (!forGood) hosts = applyDrain(hosts, host, identity, Date.now());
    else if (!(hosts = applyRetire(hosts, host, { identity }))[me]) retired = true;
  });
  setHandler(hostForgottenSignal, ({ host }) => {
    if (host === me && !(hosts = applyRetire(hosts, host, { now: Date.now() }))[me]) retired = true;
  });
  setHandler(hostQuery, () => (retired ? null : (hosts[me] ?? null)));

  let published: Published = state.published ?? { index: '', state: '' };
  const long = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > 1000;
  const wanted = (h: FleetHost): Published => ({ index: indexOf(h).join(' '), state: hostState(h, Date.now()) });
  await condition(() => retired || hosts[me] !== undefined);
  for (;;) {
    const h = hosts[me];
    if (retired || !h) return;
    const now = wanted(h);
    if (now.index !== published.index || now.state !== published.state) {
      upsertSearchAttributes([
        { key: SA.host, value: me },
        { key: SA.domains, value: now.index ? now.index.split(' ') : [] },
        { key: SA.hostState, value: now.state },
      ]);
      published = now;
    }
    // 4 events a quiet beat: ~250 beats a run, and a new worker replays at most that.
    if (long()) {
      const next = makeContinueAsNewFunc<typeof fleetHostEntry>({ typedSearchAttributes: workflowInfo().typedSearchAttributes });
      return next({ host: h, published });
    }
    const due = nextStateChangeAt(h, Date.now(), FORGET_AFTER_MS);
    if (due === undefined) return; // lost for a day: out of the index
    // Woken only by what changes the index (a beat with other domains, a drain ending, a
    // retirement); a timer that fires while beats kept the host alive just sets the next one.
    await condition(() => {
      const cur = hosts[me];
      if (retired || !cur || long()) return true;
      const w = wanted(cur);
      return w.index !== published.index || w.state !== published.state;
    }, Math.max(1, due - Date.now()));
  }
}
