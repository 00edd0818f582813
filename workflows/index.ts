export { consistentSnapshot } from './consistent-snapshot';
export { domainLock } from './domain-lock';
