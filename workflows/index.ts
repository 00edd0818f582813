export { consistentSnapshot } from './consistent-snapshot';
export { domainLock } from './domain-lock';
export { restoreVm } from './restore-vm';
export { fleetRegistry } from './fleet-registry';
export { thawWherever } from './thaw-wherever';
export { handOffFreeze } from './hand-off';
export { fleetDisksInUse } from './fleet-disks';
export { verifySnapshot } from './verify';
