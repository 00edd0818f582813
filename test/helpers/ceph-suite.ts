import { afterAll, beforeAll } from 'vitest';
import type { IoCtx, RadosCluster } from '../../src/ceph';
import { Cleanups, cephTestEnv, testCluster, testNamespace } from '../../support/ceph';
import type { CephTestEnv } from '../../support/ceph';

export interface CephSuite {
  readonly env: CephTestEnv;
  readonly cleanups: Cleanups;
  cluster: RadosCluster;
  /** A private namespace in the VM pool. */
  io: IoCtx;
  /** A private namespace in the image pool. */
  images: IoCtx;
}

/**
 * For one describe block of Ceph calls: a cluster connection and private namespaces in the VM and
 * image pools, set up before its tests and removed (with all they hold) after them.
 */
export function cephSuite(): CephSuite {
  const s = { env: cephTestEnv(), cleanups: new Cleanups() } as CephSuite;
  beforeAll(async () => {
    s.cluster = await testCluster(s.cleanups, s.env);
    s.io = await testNamespace(s.cleanups, s.cluster, s.env.vmPool);
    s.images = await testNamespace(s.cleanups, s.cluster, s.env.imagePool);
  });
  afterAll(() => s.cleanups.run());
  return s;
}
