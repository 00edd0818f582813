/*
 * Test support for code that talks to the lab's Ceph (tests and benchmarks; never shipped).
 */
export { cephTestEnv, cliArgs, type CephTestEnv } from './env';
export { Cleanups, testCluster, testNamespace } from './cleanups';
export { fillImage } from './fill-image';
export { injectCloseError } from './inject-close-error';
export { uniqueName } from './unique-name';
