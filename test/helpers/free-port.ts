// One picker of free ports for tests and lab support alike (support/ must not import test/).
export { freePort, freePortPair } from '../../support/lab/free-port';
