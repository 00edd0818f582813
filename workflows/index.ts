export { consistentSnapshot } from './consistent-snapshot';
export { domainLock } from './domain-lock';
export { restoreVm } from './restore-vm';
