import { runGuestCheck } from './guest-check';
import { recordVerification, verificationIsDue } from './verification';
import { planRestore, restoreSource } from './restore-plan';
import { cloneRestoreDisk, flattenRestoreDisk, verifyRestoreDisk } from './restore-disks';
import { defineRestoredDomain, startRestoredDomain, stopDomain, undoRestore, waitGuestReady } from './restore-domain';

/** The restoreVm and verifySnapshot workflows' activities (workflows/restore-vm.ts, workflows/verify.ts). */
export const restoreActivityFactories = {
  planRestore,
  restoreSource,
  stopDomain,
  cloneRestoreDisk,
  flattenRestoreDisk,
  verifyRestoreDisk,
  defineRestoredDomain,
  startRestoredDomain,
  waitGuestReady,
  undoRestore,
  runGuestCheck,
  recordVerification,
  verificationIsDue,
};
