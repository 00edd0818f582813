import type { ActivityDeps } from './deps';
import { runGuestCheck } from './guest-check';
import { recordVerification, verificationIsDue } from './verification';
import { planRestore, restoreSource } from './restore-plan';
import { cloneRestoreDisk, flattenRestoreDisk, verifyRestoreDisk } from './restore-disks';
import { defineRestoredDomain, startRestoredDomain, stopDomain, undoRestore, waitGuestReady } from './restore-domain';

/** The restoreVm and verifySnapshot workflows' activities (workflows/restore-vm.ts, workflows/verify.ts). */
export function restoreActivities(deps: ActivityDeps) {
  return {
    planRestore: planRestore(deps),
    restoreSource: restoreSource(deps),
    stopDomain: stopDomain(deps),
    cloneRestoreDisk: cloneRestoreDisk(deps),
    flattenRestoreDisk: flattenRestoreDisk(deps),
    verifyRestoreDisk: verifyRestoreDisk(deps),
    defineRestoredDomain: defineRestoredDomain(deps),
    startRestoredDomain: startRestoredDomain(deps),
    waitGuestReady: waitGuestReady(deps),
    undoRestore: undoRestore(deps),
    runGuestCheck: runGuestCheck(deps),
    recordVerification: recordVerification(deps),
    verificationIsDue: verificationIsDue(deps),
  };
}
