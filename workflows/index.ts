// A host queue's workflows (`vmsnap-<host>`). The fleet queue's are workflows/fleet.ts: the same
// types, with consistentSnapshot and restoreVm as routers.
export { consistentSnapshot } from './consistent-snapshot';
export { domainLock } from './domain-lock';
export { restoreVm } from './restore-vm';
export { fleetRegistry } from './fleet-registry';
export { fleetHostEntry } from './fleet-host';
export { thawWherever } from './thaw-wherever';
export { handOffFreeze } from './hand-off';
export { fleetDisksInUse } from './fleet-disks';
export { verifySnapshot } from './verify';
export { fleetLimit } from './fleet-limit';
