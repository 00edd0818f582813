/**
 * Which Ceph the tests and benchmarks talk to: the lab's, or one named by the environment.
 */
import { existsSync } from 'node:fs';
import type { ConnectOptions } from '../../src/ceph/cluster';
import { LabNotUpError, loadLabEnv, type LabEnv } from '../lab/env';

export interface CephTestEnv extends ConnectOptions {
  id: string;
  vmPool: string;
  imagePool: string;
  otherPool: string;
}

/**
 * Ceph settings for tests: CEPH_CONF/CEPH_ID/CEPH_KEYRING from process.env when set (e.g.
 * CEPH_ID=vmsnap CEPH_KEYRING=... to run as the restricted client), else the lab's env file via
 * loadLabEnv(). Throws when neither is there: a Ceph test without a cluster fails, never skips.
 */
export function cephTestEnv(): CephTestEnv {
  let lab: LabEnv | undefined;
  try {
    lab = loadLabEnv();
  } catch (e) {
    if (!(e instanceof LabNotUpError)) throw e;
  }
  const conf = process.env.CEPH_CONF ?? lab?.ceph.conf;
  if (!conf || !existsSync(conf)) throw new Error('no Ceph cluster: run `npm run lab:up` (or set CEPH_CONF)');
  const fromEnv = process.env.CEPH_ID !== undefined;
  return {
    conf,
    id: process.env.CEPH_ID ?? lab?.ceph.adminId ?? 'admin',
    keyring: fromEnv ? process.env.CEPH_KEYRING : (process.env.CEPH_KEYRING ?? lab?.ceph.adminKeyring),
    connectTimeoutSec: 10,
    vmPool: process.env.VMSNAP_VM_POOL ?? lab?.pools.vm ?? 'vms',
    imagePool: process.env.VMSNAP_IMAGE_POOL ?? lab?.pools.image ?? 'images',
    otherPool: process.env.VMSNAP_OTHER_POOL ?? lab?.pools.other ?? 'other',
  };
}

/** Arguments for the `rbd`/`ceph` CLIs matching the env. */
export function cliArgs(env: CephTestEnv): string[] {
  return ['-c', env.conf, '--id', env.id, ...(env.keyring ? ['--keyring', env.keyring] : [])];
}
