import type { SnapshotResult } from '../../src/model/types';
import { IMAGE_SNAP } from '../../src/model/naming';
import { snapshotFsState } from '../../support/lab/probe';
import type { SnapshotFsState } from '../../support/lab/probe';
import { need } from '../../support/lab/env';

/**
 * The truth table of "quiesced", checked on what a run produced: the lab guests' probe writes
 * and syncs every ~80 ms, so an ext4 snapshot taken while the guest was not frozen always has
 * `needs_recovery`, and one taken frozen never does (/work/shared/lab-notes.md). Returns the
 * violations: `quiesced: true` with an image that needs recovery.
 */
export async function quiescedTruthViolations(vars: Record<string, string>, result: SnapshotResult): Promise<string[]> {
  const out: string[] = [];
  for (const [target, state] of Object.entries(await fsStates(vars, result))) {
    if (result.quiesced && state === 'needs_recovery') out.push(`${target}: result says quiesced but its ext4 needs journal recovery`);
  }
  return out;
}

/** ext4 state of each disk's produced snapshot (the image's `snap`, or the kept source snapshot). */
export async function fsStates(vars: Record<string, string>, result: SnapshotResult): Promise<Record<string, SnapshotFsState>> {
  const out: Record<string, SnapshotFsState> = {};
  for (const d of result.disks) {
    const [spec, snap] = d.image ? [d.image, IMAGE_SNAP] : (d.snapshot.split('@') as [string, string]);
    const [pool, image] = spec.split('/');
    out[d.target] = await snapshotFsState({ cephConf: need(vars, 'CEPH_CONF'), id: 'admin', keyring: need(vars, 'CEPH_KEYRING'), pool, image, snap });
  }
  return out;
}
