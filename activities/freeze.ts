import { ApplicationFailure } from '@temporalio/common';
import { isFrozenState } from '../src/libvirt';
import { nowMs } from '../src/host/clock';
import { faultPoint } from '../src/host/fault-points';
import { M } from '../src/host/metrics';
import { FailureType } from '../src/model/failures';
import type { FreezeRequest, FreezeResult } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { toFailure } from './failures';

/**
 * virDomainFSFreeze, guarded. The host guard is armed (journal + watchdog) before the call: a
 * freeze that fails with "agent unresponsive" may still land in the guest later, and then the
 * watchdog is what thaws it if everything else is gone.
 */
export function freezeGuest(deps: ActivityDeps) {
  return async function freezeGuest(req: FreezeRequest): Promise<FreezeResult> {
    const lv = await deps.libvirt();
    let dom;
    try {
      dom = await lv.lookupDomainByUuid(req.domainUuid);
      await lv.setAgentResponseTimeout(dom, req.agentTimeoutSec);
    } catch (err) {
      throw toFailure(err, `prepare freeze of ${req.domainName}`);
    }
    await deps.guard.arm({ domainUuid: req.domainUuid, domainName: req.domainName, owner: req.owner, deadlineMs: req.deadlineMs });
    deps.metrics.add(M.frozenGuests, 1);
    await faultPoint('freeze:before-call');
    const startedAt = nowMs();
    try {
      const frozenFilesystems = await lv.fsFreeze(dom, undefined, { timeoutMs: req.agentTimeoutSec * 1000 + 2000 });
      const returnedAt = nowMs();
      await faultPoint('freeze:after');
      return { frozenFilesystems, startedAt, returnedAt };
    } catch (err) {
      deps.metrics.inc(M.failures, { step: 'freeze' });
      if (isFrozenState(err)) {
        // Someone else froze this guest (another tool, an operator). Not ours to take over.
        throw ApplicationFailure.nonRetryable(`${req.domainName} is already frozen by someone else`, FailureType.FreezeFailed);
      }
      const f = toFailure(err, `freeze ${req.domainName}`);
      throw ApplicationFailure.create({
        message: f.message,
        type: f.type === FailureType.QuiesceUnavailable ? f.type : FailureType.FreezeFailed,
        nonRetryable: true,
        details: f.details ?? undefined,
        cause: err instanceof Error ? err : undefined,
      });
    }
  };
}
