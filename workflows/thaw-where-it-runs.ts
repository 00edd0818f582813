import { ParentClosePolicy, WorkflowIdReusePolicy, condition, deprecatePatch, executeChild, log, patched, startChild, uuid4, workflowInfo } from '@temporalio/workflow';
import { FLEET_TASK_QUEUE } from '../src/model/fleet';
import type { ThawResult } from '../src/model/types';
import { prepareLocal } from './activity-profiles';
import { handOffFreeze } from './hand-off';
import type { HandOffResult } from './hand-off';
import { thawWherever } from './thaw-wherever';

/** The domain a run froze, as its thaws and its hand-off name it. */
export interface FrozenDomain {
  domainUuid: string;
  domainName: string;
  agentTimeoutSec: number;
  /** Whose freeze: `<workflowId>/<runId>` of the run that froze. */
  owner: string;
  /** Set once the freeze answered: its obligation, which a hand-off resolves. */
  freezeId?: string;
}

export const FOLLOWS_MIGRATION = 'vmsnap-thaw-follows-migration';
/**
 * Histories from before a freeze was an obligation (thawWherever, which gave up after 30 s).
 * Retire when no run begun before 2026-12-02 is open (runs end within their own timeouts; the
 * replay set keeps one such history): then the else branch and thawWherever go.
 */
const FREEZE_OBLIGATION = 'vmsnap-freeze-obligation';
/** How long the run waits for its hand-off before it reports the thaw as pending (the hand-off goes on). */
const HANDOFF_WAIT_MS = 120_000;

/**
 * This host says the domain is gone: it may run frozen on another host (a live migration carries
 * the freeze along). The freeze's hand-off — a workflow of its own that outlives this run and never
 * gives up — thaws it where it runs; this host's part ends. The run reports what it knows when it
 * stops waiting: thawed there (and when), ended there by the destination's own layers, or pending.
 */
export async function thawWhereItRuns(dom: FrozenDomain, thaw: ThawResult): Promise<ThawResult> {
  if (!thaw.domainGone) return thaw;
  deprecatePatch(FOLLOWS_MIGRATION);
  if (!patched(FREEZE_OBLIGATION)) return thawWhereverItRuns(dom, thaw);
  const handOffId = `vmsnap-handoff-${dom.freezeId ?? `${workflowInfo().workflowId}.${uuid4()}`}`;
  const child = await startChild(handOffFreeze, {
    taskQueue: FLEET_TASK_QUEUE,
    workflowId: handOffId,
    parentClosePolicy: ParentClosePolicy.ABANDON,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    args: [{ domainUuid: dom.domainUuid, domainName: dom.domainName, agentTimeoutSec: dom.agentTimeoutSec, fromHost: workflowInfo().taskQueue, owner: dom.owner, ...(dom.freezeId ? { freezeId: dom.freezeId } : {}) }],
  });
  await prepareLocal().forgetFreeze.executeWithOptions({ summary: `hand ${dom.domainName}'s freeze over to ${handOffId}` }, [{ domainUuid: dom.domainUuid, owner: dom.owner }]);
  let moved: HandOffResult | undefined;
  void child.result().then((r) => (moved = r), () => undefined);
  await condition(() => moved !== undefined, HANDOFF_WAIT_MS);
  if (!moved) {
    log.warn('guest migrated while frozen; its thaw there is not proven yet, the hand-off goes on', { domain: dom.domainName, handOff: handOffId });
    return { ...thaw, handOff: { outcome: 'pending', workflowId: handOffId } };
  }
  if (moved.outcome !== 'thawed') return { ...thaw, handOff: { outcome: moved.outcome, workflowId: handOffId, ...(moved.outcome === 'nowhere' ? { message: moved.message } : {}) } };
  log.warn('guest migrated while frozen; thawed where it runs now', { domain: dom.domainName, host: moved.host });
  const { startedMono: _s, returnedMono: _r, ...wall } = moved.thaw;
  return { ...wall, thawedOn: moved.host };
}

/** The pre-obligation branch (FREEZE_OBLIGATION unpatched): a thawWherever child that gives up after 30 s. */
async function thawWhereverItRuns(dom: FrozenDomain, thaw: ThawResult): Promise<ThawResult> {
  const { workflowId, taskQueue } = workflowInfo();
  const moved = await executeChild(thawWherever, {
    taskQueue: FLEET_TASK_QUEUE,
    workflowId: `${workflowId}.handoff.${uuid4()}`,
    args: [{ domainUuid: dom.domainUuid, domainName: dom.domainName, agentTimeoutSec: dom.agentTimeoutSec, fromHost: taskQueue, owner: dom.owner }],
  });
  await prepareLocal().forgetFreeze.executeWithOptions({ summary: `forget ${dom.domainName}'s freeze on this host` }, [{ domainUuid: dom.domainUuid, owner: dom.owner }]);
  if (moved.outcome !== 'thawed') return thaw;
  const { startedMono: _s, returnedMono: _r, ...wall } = moved.thaw;
  return { ...wall, thawedOn: moved.host };
}
